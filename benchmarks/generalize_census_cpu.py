"""Do the built-in generator's kernels survive new shapes? A census on the CPU (Triton interpreter).

    python benchmarks/generalize_census_cpu.py KERNELBENCH_DIR [--levels 1 2 3] [--only STEM ...] \
        [--timeout 300] [--max-elements 65536] [--max-flops 67108864] --out DIR

Per problem of the chosen levels: the problem scaled down (``Problem.scaled()``, reported; a problem that
cannot be scaled is listed as such), the built-in generator's first candidate for it (shape-generic or,
with the reason, shape-specialised), and the evaluator's verdict on the interpreter with ``generalize=True``
(one correctness trial at the scaled size, then the inputs' leading dimension halved and at an odd size):
``generalizes`` yes / no / n/a with the evaluator's note. No speed is measured: the interpreter checks
correctness only. Results are appended to DIR/census.jsonl as they come (a rerun skips the problems already
there) and summarised in DIR/census.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _order(p: Path) -> tuple[int, str]:
    head = p.name.split("_", 1)[0]
    return (int(head) if head.isdigit() else 0, p.name)


def census_one(path: Path, level: int, args: argparse.Namespace) -> dict[str, Any]:
    """One problem: scale, generate, evaluate with the generalize check."""
    from tritonsmith.agents.base import GenerationRequest
    from tritonsmith.agents.builtin import BuiltinGenerator
    from tritonsmith.core.problem import Problem, ProblemError
    from tritonsmith.evaluator import evaluate

    row: dict[str, Any] = {"problem": f"level{level}/{path.stem}"}
    try:
        problem = Problem.from_file(path).scaled(max_elements=args.max_elements, max_flops=args.max_flops)
    except ProblemError as exc:
        return {**row, "outcome": "not scalable", "note": str(exc)[:300]}
    row["scaling"] = problem.scaling_note or "none"
    t0 = time.perf_counter()
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0, device="cpu"))
    row["generate_s"] = round(time.perf_counter() - t0, 1)
    if cand.source is None:
        return {**row, "outcome": "error" if cand.error else "no_code", "note": cand.note[:300]}
    row["variant"] = cand.variant
    row["shapes"] = "generic" if "shape-generic" in cand.note else \
        "specialised: " + cand.note.split("shape-specialised (", 1)[-1].rstrip(")")[:240]
    t0 = time.perf_counter()
    result = evaluate(problem, cand.source, device="cpu", trials=1, benchmark=False, generalize=True,
                      timeout_s=args.timeout)
    row["evaluate_s"] = round(time.perf_counter() - t0, 1)
    row["outcome"] = result.status.value
    row["generalizes"] = result.generalizes or "not checked"
    row["note"] = (result.generalize_note or result.message or "")[:400]
    return row


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    written = [r for r in rows if "shapes" in r]
    correct = [r for r in written if r["outcome"] == "correct"]
    generic = [r for r in correct if r["shapes"] == "generic"]
    verdicts = Counter(r["generalizes"] for r in correct)
    applicable = verdicts["yes"] + verdicts["no"]
    lines = ["# Unseen-shape census of the built-in generator's kernels (CPU, Triton interpreter)", "",
             f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
             f"- machine: {platform.node()} ({os.cpu_count()} cores), torch on the CPU, Triton interpreter",
             f"- command: `{command}`",
             f"- problems: {len(rows)}; written: {len(written)}; correct at the scaled size: {len(correct)}; "
             f"shape-generic among those: {len(generic)}",
             f"- generalize check of the correct ones: yes {verdicts['yes']}, no {verdicts['no']}, n/a "
             f"{verdicts['n/a']} (the reference itself rejects other leading sizes); generalize: "
             f"{verdicts['yes']} of {applicable} whose reference accepts other leading sizes",
             "", "| problem | outcome | kernels | generalizes | note |", "|---|---|---|---|---|"]
    for r in rows:
        note = str(r.get("note", "")).replace("|", "/").replace("\n", " ")
        lines.append(f"| {r['problem']} | {r['outcome']} | {r.get('shapes', '')} | {r.get('generalizes', '')} | "
                     f"{note} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--only", nargs="*", default=[], help="problem file stems (prefixes) to run")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--max-elements", type=int, default=1 << 16)
    ap.add_argument("--max-flops", type=int, default=1 << 26)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    os.environ.setdefault("TRITONSMITH_PROFILE", "0")
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "census.jsonl"
    done = {json.loads(line)["problem"]: json.loads(line) for line in store.read_text().splitlines()} \
        if store.exists() else {}
    rows = []
    for level in args.levels:
        for path in sorted((args.kernelbench / f"level{level}").glob("*.py"), key=_order):
            key = f"level{level}/{path.stem}"
            if args.only and not any(path.stem.startswith(o) for o in args.only):
                continue
            if key not in done:
                done[key] = census_one(path, level, args)
                with store.open("a") as f:
                    f.write(json.dumps(done[key]) + "\n")
            r = done[key]
            rows.append(r)
            print(f"{key[:52]:52s} {r['outcome']:14s} {r.get('shapes', '')[:12]:12s} {r.get('generalizes', ''):12s} "
                  f"{str(r.get('note', ''))[:90]}", flush=True)
    text = markdown(rows, "python benchmarks/generalize_census_cpu.py " + " ".join(sys.argv[1:]))
    (args.out / "census.md").write_text(text)
    print(text.split("| problem |")[0])


if __name__ == "__main__":
    main()
