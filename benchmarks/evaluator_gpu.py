"""Evaluator wall time and speedup stability on a GPU (issue 2).

For each problem with a hand-written candidate in benchmarks/candidates/level1/, run the full
evaluation (5 correctness trials + timing of candidate, eager and torch.compile) three times and
report the wall time per evaluation and the spread of the speedups across the three runs.

    python benchmarks/evaluator_gpu.py /path/to/kernelbench-dev [--repeats 3]

Writes evaluator_gpu.json and evaluator_gpu.md into $OUT (default: current directory).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from pathlib import Path

from tritonsmith.tools.evaluate import evaluate

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernelbench", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT", "."))
    rows = []
    for cand in sorted((HERE / "candidates" / "level1").glob("*.py")):
        if args.only and cand.stem not in args.only:
            continue
        ref = args.kernelbench / "level1" / cand.name
        runs = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            r = evaluate(ref, cand, device="cuda", trials=5)
            runs.append({"wall_s": time.perf_counter() - t0, "status": r.status.value, "message": r.message,
                         "speedup_vs_eager": r.speedup_vs_eager, "speedup_vs_compile": r.speedup_vs_compile,
                         "candidate_ms": r.benchmark.candidate.median_ms if r.benchmark else None,
                         "candidate_spread": r.benchmark.candidate.spread if r.benchmark else None,
                         "eager_ms": r.benchmark.eager.median_ms if r.benchmark else None,
                         "compiled_ms": r.benchmark.compiled.median_ms if r.benchmark and r.benchmark.compiled else None,
                         "host_ms": r.benchmark.candidate.host_median_ms if r.benchmark else None,
                         "notes": list(r.benchmark.notes) if r.benchmark else [], "error": r.error})
            print(f"{cand.stem}: {runs[-1]['status']} {runs[-1]['wall_s']:.1f}s {runs[-1]['speedup_vs_compile']}", flush=True)
        rows.append({"problem": cand.stem, "runs": runs, **_summary(runs)})
    report = {"date": dt.date.today().isoformat(), "device": _device(), "command": " ".join(os.sys.argv), "rows": rows,
              "median_wall_s": statistics.median(r["wall_s"] for row in rows for r in row["runs"])}
    (out_dir / "evaluator_gpu.json").write_text(json.dumps(report, indent=2))
    md = _markdown(report)
    (out_dir / "evaluator_gpu.md").write_text(md)
    print(md)


def _summary(runs: list[dict]) -> dict:
    def spread(key: str) -> float | None:
        vals = [r[key] for r in runs if r[key]]
        return (max(vals) - min(vals)) / statistics.mean(vals) if len(vals) == len(runs) else None

    ok = [r for r in runs if r["status"] == "correct"]
    return {"status": runs[0]["status"] if len({r["status"] for r in runs}) == 1 else "mixed",
            "median_wall_s": statistics.median(r["wall_s"] for r in runs),
            "speedup_vs_eager": statistics.median(r["speedup_vs_eager"] for r in ok) if ok else None,
            "speedup_vs_compile": statistics.median(r["speedup_vs_compile"] for r in ok if r["speedup_vs_compile"]) if ok else None,
            "spread_vs_eager": spread("speedup_vs_eager"), "spread_vs_compile": spread("speedup_vs_compile")}


def _device() -> str:
    import torch

    return torch.cuda.get_device_name() + f" (torch {torch.__version__})"


def _fmt(x: float | None, f: str) -> str:
    return "n/a" if x is None else format(x, f)


def _markdown(report: dict) -> str:
    lines = [f"# Evaluator on {report['device']}, {report['date']}", "", f"Command: `{report['command']}`", "",
             "| problem | status | wall s (median of 3) | speedup vs eager | vs torch.compile | spread vs eager | spread vs compile |",
             "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['problem']} | {r['status']} | {r['median_wall_s']:.1f} | {_fmt(r['speedup_vs_eager'], '.2f')} | "
                     f"{_fmt(r['speedup_vs_compile'], '.2f')} | {_fmt(r['spread_vs_eager'], '.1%')} | {_fmt(r['spread_vs_compile'], '.1%')} |")
    lines += ["", f"Median wall time per evaluation: {report['median_wall_s']:.1f} s"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
