"""Wall time of one evaluation of the bundled softmax on the CPU interpreter, and where it goes.

Runs one cold evaluation (the first in this process: with the zygote it includes the zygote's start),
then ``--reps`` evaluations (5 trials each) and prints the median wall time and the median of each
``stage_seconds`` entry as one JSON line. The launcher follows ``TRITONSMITH_EVAL_ZYGOTE`` (default: on).
No speedup is measured: the CPU runs Triton's interpreter and reports no timing.

    python benchmarks/evaluator_cpu_speed.py --reps 5
    TRITONSMITH_EVAL_ZYGOTE=0 python benchmarks/evaluator_cpu_speed.py --reps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from tritonsmith.evaluator._evaluate import evaluate
from tritonsmith.evaluator.sandbox import _sandbox
from tritonsmith.examples import example_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    reference, candidate = example_path("softmax_reference.py"), example_path("softmax_triton.py").read_text()
    t0 = time.perf_counter()
    cold = evaluate(reference, candidate, device="cpu", trials=args.trials)
    cold_s = time.perf_counter() - t0
    if not cold.ok:
        raise SystemExit(cold.feedback())
    walls, stages = [], []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        result = evaluate(reference, candidate, device="cpu", trials=args.trials)
        walls.append(time.perf_counter() - t0)
        if not result.ok:
            raise SystemExit(result.feedback())
        stages.append(result.stage_seconds)
    keys = list(dict.fromkeys(k for s in stages for k in s))
    print(json.dumps({
        "launches": dict(getattr(_sandbox, "LAUNCHES", {})), "cold_s": round(cold_s, 3), "cold_stages": cold.stage_seconds,
        "walls_s": [round(w, 3) for w in walls], "median_s": round(statistics.median(walls), 3),
        "median_stages": {k: round(statistics.median(s.get(k, 0.0) for s in stages), 3) for k in keys},
    }))


if __name__ == "__main__":
    main()
