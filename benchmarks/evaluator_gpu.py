"""Evaluator wall time and speedup stability on a GPU (issue 2), with where the time goes.

For each problem with a hand-written candidate in benchmarks/candidates/level1/, run the full
evaluation (5 correctness trials + timing of candidate, eager and torch.compile) ``--repeats`` times
with workers forked from the zygote (the default launcher), then ``--spawn-repeats`` times with spawned
workers (``TRITONSMITH_EVAL_ZYGOTE=0``) for comparison. Records per run the wall time, the stage
breakdown (``EvalResult.stage_seconds``: process, zygote_start, load_reference, load_candidate, init,
trial, compile (torch.compile of the reference), bench_timed (candidate, eager and compiled timed
interleaved), bench_remeasure) and how the worker was
started, and the spread of the speedups across the zygote runs. Then (``--census``, default on) it
lists the modules a first CUDA torch.compile still imports after the zygote's preload, in a fresh
process, so the preload list can be completed.

    OUT=/some/dir python benchmarks/evaluator_gpu.py /path/to/kernelbench-dev [--repeats 3] [--spawn-repeats 1]
        [--only 19_ReLU 23_Softmax] [--no-census]

Writes evaluator_gpu.json, evaluator_gpu.md and evaluator_gpu.log (the evaluator's own log: zygote
start, fallbacks) into $OUT (default: current directory), and prints the table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tritonsmith.evaluator._evaluate import _worker_env, evaluate
from tritonsmith.evaluator.sandbox import _sandbox, _zygote

HERE = Path(__file__).parent
STAGES = ("zygote_start", "process", "load_reference", "load_candidate", "init", "trial", "benchmark",
          "compile", "bench_timed", "bench_remeasure")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernelbench", type=Path)
    parser.add_argument("--repeats", type=int, default=3, help="evaluations per problem with the zygote")
    parser.add_argument("--spawn-repeats", type=int, default=1, help="evaluations per problem with spawned workers")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--no-census", dest="census", action="store_false")
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    _log_to(out_dir / "evaluator_gpu.log")
    started = time.perf_counter()
    rows = []
    cands = [c for c in sorted((HERE / "candidates" / "level1").glob("*.py")) if not args.only or c.stem in args.only]
    for launcher, repeats in (("zygote", args.repeats), ("spawn", args.spawn_repeats)):
        os.environ[_zygote.ENV_SWITCH] = "1" if launcher == "zygote" else "0"
        for cand in cands:
            runs = [_run(args.kernelbench / "level1" / cand.name, cand, launcher) for _ in range(repeats)]
            if runs:
                rows.append({"problem": cand.stem, "launcher": launcher, "runs": runs, **_summary(runs)})
                _write(out_dir, rows, started, census=None)  # a run cut short still leaves its finished rows
    print(_write(out_dir, rows, started, census=_census(out_dir) if args.census else None))


def _write(out_dir: Path, rows: list[dict[str, Any]], started: float, census: dict[str, Any] | None) -> str:
    zygote_pid = _zygote.POOL.pid("cuda", _worker_env("cuda"))
    report: dict[str, Any] = {
        "date": dt.date.today().isoformat(), "device": _device(), "command": " ".join(sys.argv), "rows": rows,
        "zygote": _zygote_info(), "zygote_alive_at_end": zygote_pid is not None,
        "launches": dict(_sandbox.LAUNCHES), "total_s": round(time.perf_counter() - started, 1),
    }
    for launcher in ("zygote", "spawn"):
        walls = [r["wall_s"] for row in rows if row["launcher"] == launcher for r in row["runs"]]
        report[f"median_wall_s_{launcher}"] = statistics.median(walls) if walls else None
    if census:
        report["census"] = census
    (out_dir / "evaluator_gpu.json").write_text(json.dumps(report, indent=2))
    md = _markdown(report)
    (out_dir / "evaluator_gpu.md").write_text(md)
    return md


def _run(ref: Path, cand: Path, launcher: str) -> dict[str, Any]:
    before = dict(_sandbox.LAUNCHES)
    t0 = time.perf_counter()
    r = evaluate(ref, cand, device="cuda", trials=5)
    wall = time.perf_counter() - t0
    used = [k for k, v in _sandbox.LAUNCHES.items() if v > before.get(k, 0)]
    b = r.benchmark
    run = {"wall_s": wall, "launcher_asked": launcher, "launcher": used[0] if used else "none",
           "status": r.status.value, "message": r.message, "stage_seconds": r.stage_seconds,
           "speedup_vs_eager": r.speedup_vs_eager, "speedup_vs_compile": r.speedup_vs_compile,
           "candidate_ms": b.candidate.median_ms if b else None, "candidate_reps": b.candidate.reps if b else None,
           "candidate_spread": b.candidate.spread if b else None, "eager_ms": b.eager.median_ms if b else None,
           "eager_reps": b.eager.reps if b else None,
           "compiled_ms": b.compiled.median_ms if b and b.compiled else None,
           "compiled_note": b.compiled_note if b else None,
           "host_ms": b.candidate.host_median_ms if b else None, "notes": list(b.notes) if b else [], "error": r.error}
    stages = " ".join(f"{k}={v:.2f}" for k, v in r.stage_seconds.items())
    print(f"{cand.stem} [{run['launcher']}]: {run['status']} {wall:.1f}s vs compile {run['speedup_vs_compile']} | {stages}",
          flush=True)
    return run


def _summary(runs: list[dict]) -> dict:
    def spread(key: str) -> float | None:
        vals = [r[key] for r in runs if r[key]]
        return (max(vals) - min(vals)) / statistics.mean(vals) if len(vals) == len(runs) and len(vals) > 1 else None

    ok = [r for r in runs if r["status"] == "correct"]
    stages = {k: (max if k == "zygote_start" else statistics.median)(r["stage_seconds"].get(k, 0.0) for r in runs)
              for k in STAGES if any(k in r["stage_seconds"] for r in runs)}
    warm = [r["wall_s"] for r in runs if "zygote_start" not in r["stage_seconds"]]
    return {"status": runs[0]["status"] if len({r["status"] for r in runs}) == 1 else "mixed",
            "median_wall_s": statistics.median(r["wall_s"] for r in runs),
            "median_wall_s_warm": statistics.median(warm) if warm else None,
            "median_stage_seconds": stages,
            "speedup_vs_eager": statistics.median(r["speedup_vs_eager"] for r in ok) if ok else None,
            "speedup_vs_compile": statistics.median(r["speedup_vs_compile"] for r in ok if r["speedup_vs_compile"]) if ok else None,
            "spread_vs_eager": spread("speedup_vs_eager"), "spread_vs_compile": spread("speedup_vs_compile")}


def _zygote_info() -> dict[str, Any] | None:
    zygotes = getattr(_zygote.POOL, "_zygotes", {})
    for (device, _), z in zygotes.items():
        if device == "cuda":
            return {"tier": z.tier, **z.info}
    return None


_CENSUS = """
import json, sys, time
from tritonsmith.evaluator.sandbox import _zygote
preload = _zygote.preload_modules("cuda", "full")
for name in preload:
    try:
        __import__(name)
    except Exception as exc:
        print("preload failed:", name, exc, file=sys.stderr)
before = set(sys.modules)
import torch
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
x = torch.randn(32, 64)
model, x = model.cuda(), x.cuda()
t0 = time.perf_counter()
with torch.no_grad():
    torch.compile(model)(x)
torch.cuda.synchronize()
compile_s = time.perf_counter() - t0
new = sorted(m for m in set(sys.modules) - before if not m.startswith("torch._inductor.runtime.compile_tasks."))
print(json.dumps({"first_compile_s": round(compile_s, 3), "new_modules": new}))
"""


def _census(out_dir: Path) -> dict[str, Any]:
    """Modules a first CUDA torch.compile imports beyond the zygote's preload (fresh process)."""
    env = {**_worker_env("cuda"), "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.run([sys.executable, "-c", _CENSUS], env=env, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    (out_dir / "census.log").write_text(proc.stdout + "\n" + proc.stderr)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": f"exit {proc.returncode}: {proc.stderr[-500:]}"}


def _log_to(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logger = logging.getLogger("tritonsmith")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)


def _device() -> str:
    import torch

    return torch.cuda.get_device_name() + f" (torch {torch.__version__})"


def _fmt(x: float | None, f: str) -> str:
    return "n/a" if x is None else format(x, f)


def _markdown(report: dict) -> str:
    lines = [f"# Evaluator on {report['device']}, {report['date']}", "", f"Command: `{report['command']}`", "",
             "| problem | launcher | status | wall s (median) | warm wall s | speedup vs eager | vs torch.compile | "
             "spread vs eager | spread vs compile |", "|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['problem']} | {r['launcher']} | {r['status']} | {r['median_wall_s']:.1f} | "
                     f"{_fmt(r['median_wall_s_warm'], '.1f')} | {_fmt(r['speedup_vs_eager'], '.2f')} | "
                     f"{_fmt(r['speedup_vs_compile'], '.2f')} | {_fmt(r['spread_vs_eager'], '.1%')} | "
                     f"{_fmt(r['spread_vs_compile'], '.1%')} |")
    present = [k for k in STAGES if any(k in r["median_stage_seconds"] for r in report["rows"])]
    lines += ["", "Median seconds per stage (zygote_start: the first run's wait for the zygote to start, imports and CUDA probe):", "",
              "| problem | launcher | " + " | ".join(present) + " |", "|---|---|" + "---|" * len(present)]
    for r in report["rows"]:
        cells = " | ".join(_fmt(r["median_stage_seconds"].get(k), ".2f") for k in present)
        lines.append(f"| {r['problem']} | {r['launcher']} | {cells} |")
    z = report.get("zygote") or {}
    lines += ["", f"Median wall time per evaluation: zygote {_fmt(report['median_wall_s_zygote'], '.1f')} s, "
              f"spawn {_fmt(report['median_wall_s_spawn'], '.1f')} s. Launches: {report['launches']}.",
              f"Zygote: tier {z.get('tier', 'n/a')}, imports {z.get('import_s', 'n/a')} s, missing modules "
              f"{len(z.get('missing', []))}, OS threads {z.get('threads', 'n/a')}, device files {z.get('device_files', 'n/a')}, "
              f"alive at end: {report['zygote_alive_at_end']}."]
    census = report.get("census")
    if census:
        new = census.get("new_modules", [])
        lines.append(f"Census: first CUDA torch.compile after the preload took {census.get('first_compile_s', 'n/a')} s "
                     f"and imported {len(new)} more modules ({', '.join(new[:12])}{' ...' if len(new) > 12 else ''})"
                     f"{' error: ' + census['error'] if 'error' in census else ''}.")
    lines.append(f"Total benchmark time: {report['total_s']} s.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
