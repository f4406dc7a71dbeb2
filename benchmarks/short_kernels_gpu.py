"""Speedup stability for short kernels (issue 17): 3 evaluations of each of several level-1 problems
whose sizes are divided down so the candidate runs under 0.1 ms.

Each problem's largest module-level size constant is divided by ``--divide`` (default 64); the
hand-written candidate of ``benchmarks/candidates/level1`` is evaluated ``--repeats`` times in one
process, and the spread (max - min) / median of the speedups vs eager and vs torch.compile is reported
with each evaluation's 95% interval. Target: <= 3% on every problem whose candidate runs under 0.1 ms.

    OUT=/some/dir python benchmarks/short_kernels_gpu.py KERNELBENCH_DIR [--repeats 3] [--divide 64]

Writes $OUT/short_kernels.{json,md}; prints the table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any

from tritonsmith.evaluator._evaluate import evaluate

HERE = Path(__file__).resolve().parent
PROBLEMS = ("19_ReLU", "21_Sigmoid", "23_Softmax", "26_GELU_", "28_HardSigmoid", "30_Softsign", "32_HardTanh",
            "36_RMSNorm_", "38_L1Norm_", "47_Sum_reduction_over_a_dimension", "5_Matrix_scalar_multiplication")
_CONST = re.compile(r"^([A-Za-z_]\w*)\s*=\s*(\d+)\s*$", re.M)


def shrink(source: str, divide: int) -> tuple[str, str]:
    """Divide the largest module-level integer constant by ``divide``; return (source, what changed)."""
    consts = [(m.group(1), int(m.group(2)), m) for m in _CONST.finditer(source)]
    if not consts:
        return source, "unchanged"
    name, value, m = max(consts, key=lambda c: c[1])
    new = max(1, value // divide)
    return source[:m.start()] + f"{name} = {new}" + source[m.end():], f"{name} {value}->{new}"


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernelbench", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--divide", type=int, default=64)
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for stem in PROBLEMS:
            cand = HERE / "candidates" / "level1" / f"{stem}.py"
            ref = args.kernelbench / "level1" / f"{stem}.py"
            if not (cand.exists() and ref.exists()):
                continue
            source, change = shrink(ref.read_text(), args.divide)
            problem = Path(tmp) / f"{stem}.py"
            problem.write_text(source)
            runs = [evaluate(problem, cand, device="cuda", trials=3) for _ in range(args.repeats)]
            if not all(r.ok for r in runs):
                rows.append({"problem": stem, "change": change, "status": [r.status.value for r in runs],
                             "message": next(r.message for r in runs if not r.ok)})
                continue
            b = [r.benchmark for r in runs]
            row = {"problem": stem, "change": change, "cand_ms": [round(x.candidate.median_ms, 5) for x in b],
                   "vs_eager": [round(r.speedup_vs_eager, 4) for r in runs],
                   "vs_compile": [round(r.speedup_vs_compile, 4) for r in runs if r.speedup_vs_compile],
                   "ci_vs_compile": [[round(v, 4) for v in x.speedup_ci_vs_compile] for x in b if x.speedup_ci_vs_compile],
                   "rounds": [x.candidate.reps for x in b], "launch_ms": [round(x.candidate.launch_ms or 0, 4) for x in b],
                   "wall_s": [round(r.wall_s, 2) for r in runs]}
            row["spread_eager"] = round(spread(row["vs_eager"]), 4)
            row["spread_compile"] = round(spread(row["vs_compile"]), 4) if row["vs_compile"] else None
            rows.append(row)
            print(json.dumps(row), flush=True)
            (out / "short_kernels.json").write_text(json.dumps(
                {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "divide": args.divide, "rows": rows}, indent=1))
    lines = ["| problem | size change | cand ms | vs eager (3 runs) | spread | vs compile (3 runs) | spread | rounds | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "status" in r:
            lines.append(f"| {r['problem']} | {r['change']} | not correct: {r['status']} {r['message'][:80]} | | | | | | |")
            continue
        lines.append(f"| {r['problem']} | {r['change']} | {max(r['cand_ms']):.4f} | {r['vs_eager']} | {r['spread_eager']:.1%} | "
                     f"{r['vs_compile']} | {r['spread_compile']:.1%} | {r['rounds']} | {r['wall_s']} |")
    text = "\n".join(lines)
    (out / "short_kernels.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
