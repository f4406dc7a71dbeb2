"""How much do the evaluator's anti-cheating checks add to one evaluation's wall time?

Evaluates the bundled softmax example with the checks on and off, alternating, ``--reps`` times each,
and reports the median wall time of each and the difference (target: under 10%). Static-check time is
reported separately. With ``--gpu-tests`` (CUDA only) it then runs the GPU-marked evaluator tests and
the static-check tests, logging to ``$OUT`` (the CPU adversarial suite is left to CPU CI).

CPU:  python benchmarks/evaluator_overhead.py --device cpu --reps 5
GPU:  OUT=/some/dir python benchmarks/evaluator_overhead.py --device cuda --reps 3 --gpu-tests
Writes ``$OUT/evaluator_overhead.json`` (and ``$OUT/gpu_tests.log``); prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tritonsmith.evaluator._checks import check_source
from tritonsmith.evaluator._evaluate import evaluate
from tritonsmith.examples import example_path

ROOT = Path(__file__).resolve().parents[1]


def measure(device: str, reps: int, trials: int, compile_mode: str) -> dict[str, object]:
    reference = example_path("softmax_reference.py")
    candidate = example_path("softmax_triton.py").read_text()
    walls: dict[bool, list[float]] = {True: [], False: []}
    worker: dict[bool, list[float]] = {True: [], False: []}
    stages: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    rounds: dict[bool, list[int]] = {True: [], False: []}
    evaluate(reference, candidate, device=device, trials=1, compile_mode=compile_mode)  # warm caches (Triton, inductor)
    for _ in range(reps):
        for checks in (True, False):
            start = time.perf_counter()
            result = evaluate(reference, candidate, device=device, trials=trials, checks=checks,
                              compile_mode=compile_mode)
            walls[checks].append(time.perf_counter() - start)
            worker[checks].append(result.wall_s)
            stages[checks].append(result.stage_seconds)
            if result.benchmark:
                rounds[checks].append(result.benchmark.candidate.reps)
            if not result.ok:
                raise SystemExit(f"the honest candidate failed (checks={checks}): {result.feedback()}")
    t0 = time.perf_counter()
    for _ in range(100):
        check_source(candidate, reference_source=reference.read_text())
    static_ms = (time.perf_counter() - t0) * 10
    on, off = statistics.median(walls[True]), statistics.median(walls[False])
    return {"device": device, "reps": reps, "trials": trials, "compile_mode": compile_mode,
            "wall_on_s": walls[True], "wall_off_s": walls[False], "median_on_s": on, "median_off_s": off,
            "overhead_pct": 100.0 * (on - off) / off, "static_check_ms": static_ms,
            "stage_median_on_s": _stage_medians(stages[True]), "stage_median_off_s": _stage_medians(stages[False]),
            "timed_rounds_on": rounds[True], "timed_rounds_off": rounds[False],
            "python": platform.python_version(), "machine": platform.machine(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def _stage_medians(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({k for r in runs for k in r})
    return {k: round(statistics.median(r.get(k, 0.0) for r in runs), 4) for k in keys}


def run_gpu_tests(out: Path) -> int:
    log = out / "gpu_tests.log"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/evaluator/test_evaluate_gpu.py",
           "tests/evaluator/test_checks.py", "-rA", "--timeout=900"]
    try:
        import pytest_timeout  # noqa: F401
    except ImportError:
        cmd.remove("--timeout=900")
    with open(log, "w") as f:
        return subprocess.call(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--compile-mode", default=None,
                        help="torch.compile baseline (default: 'default' on CUDA, as one evaluation runs it; 'none' on the CPU)")
    parser.add_argument("--gpu-tests", action="store_true")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    compile_mode = args.compile_mode or ("default" if args.device == "cuda" else "none")
    data = measure(args.device, args.reps, args.trials, compile_mode)
    if args.gpu_tests:
        data["gpu_tests_exit_code"] = run_gpu_tests(out)
    (out / "evaluator_overhead.json").write_text(json.dumps(data, indent=2))
    print(f"{'device':8} {'reps':>4} {'checks on (s)':>14} {'checks off (s)':>15} {'overhead':>9} {'static (ms)':>12}")
    print(f"{data['device']:8} {data['reps']:>4} {data['median_on_s']:>14.2f} {data['median_off_s']:>15.2f} "
          f"{data['overhead_pct']:>8.1f}% {data['static_check_ms']:>12.2f}")
    on_st, off_st = data["stage_median_on_s"], data["stage_median_off_s"]
    print(f"\n{'stage (median s)':34} {'checks on':>10} {'checks off':>11} {'difference':>11}")
    for key in sorted(set(on_st) | set(off_st), key=lambda k: -abs(on_st.get(k, 0.0) - off_st.get(k, 0.0))):
        print(f"{key:34} {on_st.get(key, 0.0):>10.3f} {off_st.get(key, 0.0):>11.3f} "
              f"{on_st.get(key, 0.0) - off_st.get(key, 0.0):>+11.3f}")
    print(f"timed rounds (median): on {statistics.median(data['timed_rounds_on'] or [0]):.0f}, "
          f"off {statistics.median(data['timed_rounds_off'] or [0]):.0f}")
    if "gpu_tests_exit_code" in data:
        print(f"GPU tests exit code: {data['gpu_tests_exit_code']} (log: {out / 'gpu_tests.log'})")


if __name__ == "__main__":
    main()
