"""Do the verified kernels of a suite run survive new shapes? The evaluator's ``generalize`` check over a run.

    python benchmarks/generalize_check.py RUN_DIR KERNELBENCH_DIR [--device cuda] [--scale] [--timeout 300]

For every ``correct`` record of RUN_DIR/results.jsonl, its kernel (RUN_DIR/kernels/KEY.py) is evaluated again
against KERNELBENCH_DIR/level{L}/{problem}.py with ``generalize=True`` (correctness only, no timing): the
inputs' leading dimension halved and at an odd size. Prints a table (problem, generalizes yes/no/n/a, note)
and the share that generalises among the kernels whose reference accepts other leading sizes; writes
generalize.json and generalize.md into --out when given. ``--scale`` must match the run (a CPU run with
--scale wrote kernels for the scaled problems).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def check_run(run_dir: Path, kb: Path, device: str, scale: bool, timeout: float) -> list[dict[str, Any]]:
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.suite.results import RunStore
    from tritonsmith.evaluator._evaluate import evaluate

    rows = []
    for rec in RunStore(run_dir).records():
        if not rec.ok or not rec.candidate_file:
            continue
        ref = kb / f"level{rec.level}" / f"{rec.problem}.py"
        row: dict[str, Any] = {"problem": f"level{rec.level}/{rec.problem}"}
        try:
            result = evaluate(ref, run_dir / rec.candidate_file, device=device, trials=2, benchmark=False,
                              scale=scale, timeout_s=timeout, generalize=True)
        except (ProblemError, OSError) as exc:
            row.update(generalizes="not checked", note=f"{type(exc).__name__}: {exc}"[:300])
        else:
            row.update(generalizes=result.generalizes or f"not checked ({result.status.value})",
                       note=(result.generalize_note or result.message)[:300])
        rows.append(row)
        print(f"{row['problem'][:48]:48s} {row['generalizes']:12s} {row['note'][:140]}", flush=True)
    return rows


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    applicable = [r for r in rows if r["generalizes"] in ("yes", "no")]
    yes = sum(r["generalizes"] == "yes" for r in applicable)
    lines = ["# Unseen-shape check of verified kernels", "",
             f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
             f"- machine: {platform.node()} ({os.cpu_count()} cores)", f"- command: `{command}`",
             f"- verified kernels checked: {len(rows)}; reference accepts other leading sizes: {len(applicable)}; "
             f"generalize: {yes} of {len(applicable)}", "", "| problem | generalizes | note |", "|---|---|---|"]
    lines += [f"| {r['problem']} | {r['generalizes']} | {r['note'].replace('|', '/')} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = check_run(args.run_dir, args.kernelbench, args.device, args.scale, args.timeout)
    text = markdown(rows, "python benchmarks/generalize_check.py " + " ".join(sys.argv[1:]))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "generalize.json").write_text(json.dumps(rows, indent=1))
        (args.out / "generalize.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
