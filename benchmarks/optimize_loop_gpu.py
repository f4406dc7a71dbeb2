"""GPU check of the refinement loop: real timings, rewards vs torch.compile, the profiler node.

    OUT=/tmp/out python benchmarks/optimize_loop_gpu.py

Needs a CUDA GPU and langgraph + langchain-core + langchain-openai importable (no LLM is used: the
built-in generator writes the candidates; chromadb is not needed, the memory is off). Runs two loops on
the bundled softmax problem (about 1-3 minutes): the built-in generator for 3 iterations, and a run
starting from the bundled kernel (``--from``). Writes report JSON/Markdown per run into $OUT and prints
a table last.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from tritonsmith.examples import example_path
    from tritonsmith.graphs import optimize

    problem = example_path("softmax_reference.py")
    runs = {
        "builtin": dict(generator="builtin"),
        "from_bundled_kernel": dict(generator="builtin", start_from=example_path("softmax_triton.py")),
    }
    rows = []
    for name, kwargs in runs.items():
        events: list[dict] = []
        started = time.perf_counter()
        result = optimize(problem, device="cuda", iterations=3, trials=3, use_memory=False, on_event=events.append,
                          **kwargs)
        wall = time.perf_counter() - started
        (out / f"{name}.json").write_text(json.dumps({**result.to_dict(), "events": events, "wall_s": wall}, indent=2))
        (out / f"{name}.md").write_text(result.to_markdown())
        for a in result.attempts:
            rows.append((name, a.iteration, a.generator, a.status, a.speedup, a.reward_basis, a.reward))
        rows.append((name, "best", result.best_iteration, result.status, result.speedup_vs_compile,
                     f"{wall:.0f}s", result.best_reward))
    print(f"{'run':<22}{'iter':>5}  {'gen':<9}{'status':<14}{'speedup':>9}  {'basis':<14}{'reward':>7}")
    for run, it, gen, status, speed, basis, reward in rows:
        sp = f"{speed:.2f}x" if isinstance(speed, float) else "-"
        rw = f"{reward:.3f}" if isinstance(reward, float) else "-"
        print(f"{run:<22}{it!s:>5}  {gen!s:<9}{status:<14}{sp:>9}  {basis!s:<14}{rw:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
