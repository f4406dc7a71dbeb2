"""No false rejections (issue 17): every honest kernel we have, through the evaluator with all checks on.

Evaluates, on CUDA, with the default policy (hybrid), 5 trials and the ``kernelbench`` tolerance:
the kernels a recorded suite run verified (``--suite RESULTS_DIR``: its kernels_and_logs.tar.gz),
the hand-written candidates of ``benchmarks/candidates/level1`` and the tests' honest candidates. The
seed library has its own script (``benchmarks/seed_library_gpu.py``). Any status other than ``correct``
is listed with its rule and message: a ``rejected`` here is a false rejection to fix.

    OUT=/some/dir python benchmarks/evaluator_honest_gpu.py KERNELBENCH_DIR --suite benchmarks/results/h200-2026-12-04/suite

Writes $OUT/evaluator_honest.{json,md}; prints the table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from tritonsmith.evaluator._evaluate import evaluate

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def cases(kb: Path, suite: Path | None, work: Path) -> list[tuple[str, Path, Path]]:
    """(label, problem file, candidate file) for every honest kernel we have."""
    found: list[tuple[str, Path, Path]] = []
    if suite is not None:
        with tarfile.open(suite / "kernels_and_logs.tar.gz") as tar:
            tar.extractall(work, filter="data")
        for k in sorted((work / "kernels").glob("level*/*.py")):
            found.append((f"suite/{k.parent.name}/{k.stem}", kb / k.parent.name / k.name, k))
    for c in sorted((HERE / "candidates" / "level1").glob("*.py")):
        found.append((f"candidates/level1/{c.stem}", kb / "level1" / c.name, c))
    tests = ROOT / "tests" / "evaluator"
    silu = work / "silu_bias.py"
    silu.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self, f):\n"
                    "        super().__init__()\n        self.bias = nn.Parameter(torch.randn(f))\n\n"
                    "    def forward(self, x):\n        return torch.nn.functional.silu(x) + self.bias\n\n\n"
                    "def get_inputs():\n    return [torch.randn(64, 128, 1021)]\n\n\ndef get_init_inputs():\n    return [1021]\n")
    found += [("tests/honest/silu_bias", silu, tests / "honest" / "silu_bias.py"),
              ("tests/honest/hybrid_silu_bias", silu, tests / "honest" / "hybrid_silu_bias.py"),
              ("examples/softmax", ROOT / "src/tritonsmith/examples/softmax_reference.py",
               ROOT / "src/tritonsmith/examples/softmax_triton.py")]
    return [c for c in found if c[1].exists()]


def run(label: str, problem: Path, cand: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = evaluate(problem, cand, device="cuda", trials=5)
    b = r.benchmark
    return {"case": label, "status": r.status.value, "rule": r.rule, "message": r.message[:300],
            "wall_s": round(time.perf_counter() - t0, 2),
            "vs_compile": round(r.speedup_vs_compile, 3) if r.speedup_vs_compile else None,
            "vs_eager": round(r.speedup_vs_eager, 3) if r.speedup_vs_eager else None,
            "ci_vs_compile": [round(x, 3) for x in b.speedup_ci_vs_compile] if b and b.speedup_ci_vs_compile else None,
            "candidate_ms": round(b.candidate.median_ms, 4) if b else None,
            "rounds": b.candidate.reps if b else None,
            "floor_ms": round(b.light_floor_ms, 4) if b and b.light_floor_ms else None,
            "triton_share": round(r.checks.triton_share, 3) if r.checks and r.checks.triton_share is not None else None,
            "notes": list(r.checks.notes) if r.checks else []}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernelbench", type=Path)
    parser.add_argument("--suite", type=Path, default=None)
    parser.add_argument("--start", type=int, default=1, help="first case to run (1-based: resume a cut visit)")
    parser.add_argument("--only", nargs="*", default=None, help="cases whose label contains one of these")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(args.kernelbench, args.suite, Path(tmp))
        for i, (label, problem, cand) in enumerate(todo, 1):
            if i < args.start or (args.only and not any(o in label for o in args.only)):
                continue
            try:
                rows.append(run(label, problem, cand))
            except Exception as exc:  # a broken reference: say so, keep going
                rows.append({"case": label, "status": "error", "message": f"{type(exc).__name__}: {exc}"[:300]})
            row = rows[-1]
            print(f"[{i}/{len(todo)}] {label}: {row['status']} {row.get('rule') or ''} "
                  f"{row.get('vs_compile') or ''} {row.get('wall_s', '')}s", flush=True)
            (out / "evaluator_honest.json").write_text(json.dumps(
                {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "rows": rows}, indent=1))
    _table(rows, out)


def _table(rows: list[dict[str, Any]], out: Path) -> None:
    bad = [r for r in rows if r["status"] != "correct"]
    lines = [f"# Honest kernels through the evaluator ({len(rows)} cases, {len(bad)} not correct)", "",
             "| case | status | rule | vs compile (95% CI) | cand ms | rounds | floor ms | Triton share | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = r.get("ci_vs_compile")
        lines.append(f"| {r['case']} | {r['status']} | {r.get('rule') or ''} | {r.get('vs_compile') or ''}"
                     f"{f' ({ci[0]}-{ci[1]})' if ci else ''} | {r.get('candidate_ms') or ''} | {r.get('rounds') or ''} | "
                     f"{r.get('floor_ms') or ''} | {r.get('triton_share') if r.get('triton_share') is not None else ''} | "
                     f"{r.get('wall_s', '')} |")
    for r in bad:
        lines.append(f"\n- {r['case']}: {r['status']} {r.get('rule') or ''}: {r['message']}")
    text = "\n".join(lines)
    (out / "evaluator_honest.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
