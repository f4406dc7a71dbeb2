"""Suite runs on GPUs, in one go, with everything worth keeping copied into $OUT (at most 8 files).

record   (issue 8)  the built-in generator over levels 1-2 of a KernelBench directory on the visible GPUs,
                    levels interleaved, new problems started only within --time-budget seconds:

    .venv/bin/python benchmarks/suite_gpu.py record --kernelbench shared/kernelbench-dev

scaling  (issue 9)  the same 20 problems once on one GPU and once on all visible GPUs; wall time, GPU
                    utilisation (nvidia-smi every 0.5 s) and whether verdicts/speedups agree:

    .venv/bin/python benchmarks/suite_gpu.py scaling --kernelbench shared/kernelbench-dev --phase both

Each run directory lives under /tmp (kernels and worker logs go back as one .tar.gz); results.jsonl is
copied to $OUT after every finished problem, so a run cut short still returns what it finished.
``tritonsmith report DIR`` (or ``--compare``) rebuilds reports from the returned files anywhere.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

from tritonsmith.suite.pool import LocalPool, plan_slots, visible_gpus
from tritonsmith.suite.report import write_comparison, write_report
from tritonsmith.suite.results import ProblemRecord
from tritonsmith.suite.runner import LogProgress, SuiteProblem, discover_problems, run_suite
from tritonsmith.suite.settings import SuiteSettings

log = logging.getLogger("suite_gpu")
OUT = Path(os.environ.get("OUT", "."))


def find_kernelbench(given: str | None) -> Path:
    here = Path(__file__).resolve().parents[1]
    for cand in ([Path(given)] if given else []) + [here / "shared" / "kernelbench-dev", here.parent / "shared" /
                                                     "kernelbench-dev"]:
        if cand.is_dir():
            return cand
    raise SystemExit(f"no KernelBench directory found (tried {given!r}, shared/kernelbench-dev, ../shared/...)")


def interleave(root: Path, levels: list[int], limit: int | None) -> list[SuiteProblem]:
    """Problems of the levels taken in turn (1, 2, 1, 2, ...), so a time budget samples every level."""
    per_level = [discover_problems([root / f"level{lv}"]) for lv in levels if (root / f"level{lv}").is_dir()]
    out: list[SuiteProblem] = []
    for i in range(max((len(p) for p in per_level), default=0)):
        out += [p[i] for p in per_level if i < len(p)]
    return out[:limit] if limit else out


class CopyingProgress(LogProgress):
    """Logs, and copies results.jsonl to $OUT after every problem (a cut-short run still returns them)."""

    def __init__(self, run_dir: Path, name: str) -> None:
        self.run_dir, self.name = run_dir, name

    def finished(self, record: ProblemRecord) -> None:
        super().finished(record)
        speed = f" {record.speedup_vs_eager:.2f}x eager" if record.speedup_vs_eager is not None else ""
        comp = f" {record.speedup_vs_compile:.2f}x compile" if record.speedup_vs_compile is not None else ""
        # each attempt as variant:speedup vs compile (or its verdict), so a visit's output tail alone tells
        trail = " ".join(f"{a.variant or '?'}:{a.speedup:.2f}" if a.speedup else f"{a.variant or '?'}:{a.status}"
                         for a in record.trail)
        print(f"[{time.strftime('%H:%M:%S')}] {record.status:>14} {record.key}{speed}{comp} ({record.wall_s:.1f} s, "
              f"{record.worker}) [{trail}]", flush=True)
        shutil.copyfile(self.run_dir / "results.jsonl", OUT / self.name)


def run_one(problems: list[SuiteProblem], run_dir: Path, *, workers: int | None, iterations: int, budget: float,
            hard_stop: float, eval_timeout: float, results_name: str,
            slots_per_gpu: int = 1) -> tuple[float, list[ProblemRecord]]:
    run_dir.mkdir(parents=True, exist_ok=True)
    pool = LocalPool(plan_slots("cuda", workers=workers, slots_per_gpu=slots_per_gpu, lock_dir=run_dir),
                     log_dir=run_dir / "logs")
    timer = threading.Timer(hard_stop, pool.shutdown)  # in-flight problems keep their finished attempts (else `error`, retried on resume)
    timer.start()
    start = time.perf_counter()
    try:
        settings = SuiteSettings(generator="builtin", iterations=iterations, device="cuda",
                                 eval_timeout_s=eval_timeout, time_budget_s=budget)
        run = run_suite(problems, run_dir, settings, pool=pool, progress=CopyingProgress(run_dir, results_name))
    finally:
        timer.cancel()
    return time.perf_counter() - start, run.records


def pack(run_dir: Path, name: str) -> None:
    with tarfile.open(OUT / name, "w:gz") as tar:
        for sub in ("kernels", "logs"):
            if (run_dir / sub).exists():
                tar.add(run_dir / sub, arcname=sub)


def record_cmd(args: argparse.Namespace) -> None:
    problems = interleave(find_kernelbench(args.kernelbench), args.levels, args.limit)
    run_dir = Path(args.run_dir)
    if not args.resume:
        shutil.rmtree(run_dir, ignore_errors=True)
    wall, records = run_one(problems, run_dir, workers=args.workers, iterations=args.iterations,
                            budget=args.time_budget, hard_stop=args.hard_stop, eval_timeout=args.eval_timeout,
                            results_name="results.jsonl", slots_per_gpu=args.slots_per_gpu)
    report = write_report(run_dir)
    for name in ("report.md", "report.json", "run.json", "speedups.png", "fast_p.png"):
        if (run_dir / name).exists():
            shutil.copyfile(run_dir / name, OUT / name)
    pack(run_dir, "kernels_and_logs.tar.gz")
    s = report.summary
    overheads = sorted(r.overhead_s for r in records)
    print(f"\nproblems {s.problems} of {len(problems)} | correct {s.correct} ({s.correctness_rate:.0%}) | timed {s.timed}"
          f" | wall {wall:.0f} s | runner overhead median {overheads[len(overheads) // 2] if overheads else 0:.3f} s")
    print(f"{'baseline':>8} " + " ".join(f"{'fast_' + k:>9}" for k in s.fast_p["eager"]) + f" {'geomean':>8}")
    for base in ("eager", "compile"):
        fp = s.fast_p[base]
        gm = s.geomean[base]
        print(f"{base:>8} " + " ".join(f"{(v if v is not None else float('nan')):>9.1%}" for v in fp.values())
              + f" {gm if gm is not None else float('nan'):>7.2f}x")


def sample_gpus(path: Path) -> subprocess.Popen[bytes] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    with open(path, "wb") as f:
        return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,index,utilization.gpu,memory.used",
                                 "--format=csv,noheader,nounits", "-lms", "500"], stdout=f, stderr=subprocess.DEVNULL)


def mean_util(path: Path) -> dict[str, float]:
    per: dict[str, list[float]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[2].replace(".", "").isdigit():
            per.setdefault(parts[1], []).append(float(parts[2]))
    return {k: sum(v) / len(v) for k, v in per.items()}


def scaling_cmd(args: argparse.Namespace) -> None:
    problems = interleave(find_kernelbench(args.kernelbench), args.levels, args.problems)
    gpus = visible_gpus()
    summary: dict[str, object] = {"gpus": gpus, "problems": [p.key for p in problems], "iterations": args.iterations}
    phases = ["one", "all"] if args.phase == "both" else [args.phase]
    for phase in phases:
        run_dir = Path(args.run_dir) / phase
        shutil.rmtree(run_dir, ignore_errors=True)  # each phase times the whole set afresh
        sampler = sample_gpus(OUT / f"gpu_util_{phase}.csv")
        try:
            wall, records = run_one(problems, run_dir, workers=1 if phase == "one" else None,
                                    iterations=args.iterations, budget=args.time_budget, hard_stop=args.hard_stop,
                                    eval_timeout=args.eval_timeout, results_name=f"results_{phase}.jsonl")
        finally:
            if sampler:
                sampler.terminate()
        shutil.copyfile(run_dir / "run.json", OUT / f"run_{phase}.json")
        summary[phase] = {"wall_s": wall, "workers": 1 if phase == "one" else len(gpus), "finished": len(records),
                          "mean_gpu_util_pct": mean_util(OUT / f"gpu_util_{phase}.csv")}
        print(f"phase {phase}: {len(records)} problems in {wall:.0f} s; GPU util {summary[phase]}", flush=True)
    if len(phases) == 2:
        md, data = write_comparison(Path(args.run_dir) / "one", Path(args.run_dir) / "all")
        shutil.copyfile(md, OUT / "compare.md")
        summary["agreement"] = {k: data[k] for k in ("problems_in_both", "same_verdict", "timed_in_both",
                                                     "speedups_agree")}
    (OUT / f"scaling_{args.phase}.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if k != "problems"}, indent=1))


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description="tritonsmith suite runs on GPUs")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, budget in (("record", 420.0), ("scaling", 200.0)):
        p = sub.add_parser(name)
        p.add_argument("--kernelbench", default=None, help="KernelBench directory with level1/, level2/")
        p.add_argument("--levels", type=int, nargs="+", default=[1, 2])
        p.add_argument("--iterations", type=int, default=2 if name == "record" else 1)
        p.add_argument("--time-budget", type=float, default=budget, help="start no new problem after this (s)")
        p.add_argument("--hard-stop", type=float, default=budget + (130 if name == "record" else 60),
                       help="end in-flight work after this (s)")
        p.add_argument("--eval-timeout", type=float, default=90.0, help="per-evaluation limit (s)")
        p.add_argument("--run-dir", default=f"/tmp/tritonsmith-suite-{name}")
    sub.choices["record"].add_argument("--workers", type=int, default=None, help="GPUs to use (default all)")
    sub.choices["record"].add_argument("--limit", type=int, default=None, help="at most this many problems")
    sub.choices["record"].add_argument("--resume", action="store_true", help="continue the run in --run-dir")
    sub.choices["record"].add_argument("--slots-per-gpu", type=int, default=1,
                                       help="workers per GPU; >1 overlaps generation with another's evaluation "
                                            "(each evaluation still holds its GPU alone)")
    for name in ("record", "scaling"):
        sub.choices[name].add_argument("--no-profile", action="store_true",
                                       help="refine from verdicts only (TRITONSMITH_PROFILE=0): a profile costs 20-40 s")
    sub.choices["scaling"].add_argument("--problems", type=int, default=20)
    sub.choices["scaling"].add_argument("--phase", choices=["one", "all", "both"], default="both")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.no_profile:
        os.environ["TRITONSMITH_PROFILE"] = "0"  # inherited by the pool's workers
    if args.cmd == "record":
        record_cmd(args)
    else:
        scaling_cmd(args)


if __name__ == "__main__":
    sys.exit(main())
