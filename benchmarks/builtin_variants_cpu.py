"""Every variant the built-in generator could try, on every problem it writes, through the CPU interpreter.

The dry run (`builtin_generator.py --dry`) checks only the first candidate of each problem: on the CPU a
correct kernel ends the refinement (speed cannot be judged). This writes each non-default variant of each
problem's menu (``variant_menu``, minus ``ieee``, which only follows a wrong tf32 answer) for the problem
scaled down, and checks it with one correctness trial, so no GPU iteration is spent on a broken variant.

    .venv/bin/python benchmarks/builtin_variants_cpu.py ../shared/kernelbench-dev [--levels 1 2]

Prints one line per failing variant and a summary; writes nothing else.
"""

from __future__ import annotations

import argparse
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def candidates(root: Path, levels: list[int], work: Path) -> list[tuple[str, str, Any, Path]]:
    from tritonsmith.agents.builtin import _plan
    from tritonsmith.agents.builtin._emit import emit_module
    from tritonsmith.agents.builtin._ir import UnsupportedError
    from tritonsmith.agents.builtin._variants import variant_menu
    from tritonsmith.core.problem import Problem, ProblemError

    jobs = []
    for f in sorted(p for level in levels for p in (root / f"level{level}").glob("*.py")):
        try:
            prob = Problem.from_file(f).scaled()
            _, plan = _plan(prob, {}, None)
        except (ProblemError, UnsupportedError):
            continue  # not scalable, or nothing the generator writes: the dry run reports those
        for v in variant_menu(plan):
            if v.key in ("default", "ieee"):
                continue
            traced, vplan = _plan(prob, v.options, None)
            path = work / f"{f.parent.name}_{f.stem}_{v.key.replace('-', '_')}.py"
            path.write_text(emit_module(prob.name, prob.source, traced, vplan, v.overrides, v.key))
            jobs.append((f"{f.parent.name}/{f.stem}", v.key, prob, path))
    return jobs


def main() -> None:
    from tritonsmith import evaluate

    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tritonsmith-variants-"))
    jobs = candidates(args.root, args.levels, work)
    print(f"{len(jobs)} variant candidates of {len({j[0] for j in jobs})} problems", flush=True)

    def check(job: tuple[str, str, Any, Path]) -> tuple[str, str, str, str]:
        key, variant, prob, path = job
        result = evaluate(prob, path, device="cpu", trials=1)
        return key, variant, result.status.value, result.message[:200]

    bad = 0
    with ThreadPoolExecutor(2) as pool:
        for key, variant, status, message in pool.map(check, jobs):
            if status != "correct":
                bad += 1
                print(f"{status:>14} {key} {variant}: {message}", flush=True)
    print(f"{len(jobs) - bad} of {len(jobs)} variant candidates correct", flush=True)


if __name__ == "__main__":
    main()
