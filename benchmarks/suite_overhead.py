"""Per-problem overhead of the suite runner itself, measured with an optimize function that does nothing.

Everything the runner does per problem is counted: handing the task to a worker process, loading and
validating the problem, writing the best kernel, sending the record back, appending it durably
(fsync) to results.jsonl, progress callbacks. Compile and GPU time are zero here by construction, so
(wall time - time inside the optimize function) / problems is the runner's own cost. Worker start-up
(importing torch) is included, amortised over the run.

    .venv/bin/python benchmarks/suite_overhead.py [--problems 60] [--workers 1]

Writes ``$OUT/suite_overhead.json`` (default: this directory) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {k}


def get_inputs():
    return [torch.randn(17, {k})]


def get_init_inputs():
    return []
"""


def noop_optimize(problem, *, generator, iterations, device, **settings):  # noqa: ANN001, ANN003, ANN201
    """Returns at once: a verdict with no compile, no GPU and no generator work."""
    from tritonsmith.core.results import EvalResult, EvalStatus
    from tritonsmith.suite import OptimizeOutcome

    result = EvalResult(status=EvalStatus.CORRECT, message="noop", problem=problem.name, device=device,
                        device_name="none", tolerance="kernelbench")
    return OptimizeOutcome(best_source="# noop\n", best_result=result, iterations=iterations, generator="noop")


def measure(problems: int, workers: int) -> dict[str, object]:
    from tritonsmith.suite import SuiteSettings, discover_problems, run_suite, write_report

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "level1"
        root.mkdir()
        for i in range(problems):
            (root / f"{i + 1}_P.py").write_text(PROBLEM.format(k=i + 3))
        found = discover_problems([root])
        start = time.perf_counter()
        run = run_suite(found, Path(tmp) / "run", SuiteSettings(device="cpu", workers=workers, generator="default",
                                                                optimize_fn="suite_overhead:noop_optimize"))
        wall = time.perf_counter() - start
        t = time.perf_counter()
        write_report(run.run_dir)
        report_s = time.perf_counter() - t
        bad = [r for r in run.records if r.status != "correct"]
        if bad or len(run.records) != problems:
            raise SystemExit(f"the overhead run itself failed: {len(run.records)} records, first bad: "
                             f"{bad[0].message if bad else 'none'}")
        work = sum(r.work_s for r in run.records)
        per = sorted(r.overhead_s for r in run.records)
    return {"problems": problems, "workers": workers, "wall_s": wall, "work_s": work,
            "overhead_per_problem_s": (wall * workers - work) / problems,  # worker-seconds not spent optimizing
            "record_overhead_median_s": statistics.median(per), "record_overhead_max_s": per[-1],
            "report_s": report_s, "statuses": sorted({r.status for r in run.records})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=60)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    sys.path.insert(0, str(HERE))
    rows = [measure(args.problems, w) for w in args.workers]
    out = Path(os.environ.get("OUT", HERE))
    out.mkdir(parents=True, exist_ok=True)
    record = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.platform(),
              "cpus": os.cpu_count(), "python": platform.python_version(), "command": " ".join(sys.argv),
              "target_s": 1.0, "runs": rows}
    (out / "suite_overhead.json").write_text(json.dumps(record, indent=2))
    print(f"{'workers':>7} {'problems':>8} {'wall s':>8} {'overhead/problem s':>19} {'median rec s':>13} "
          f"{'max rec s':>10} {'report s':>9}")
    for r in rows:
        print(f"{r['workers']:>7} {r['problems']:>8} {r['wall_s']:>8.2f} {r['overhead_per_problem_s']:>19.4f} "
              f"{r['record_overhead_median_s']:>13.4f} {r['record_overhead_max_s']:>10.4f} {r['report_s']:>9.2f}")


if __name__ == "__main__":
    main()
