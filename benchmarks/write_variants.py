"""Write the built-in generator's candidates of chosen variants for chosen problems, for a GPU visit to time.

    python3 benchmarks/write_variants.py [--set MODULE.NAME=INT --label LABEL] OUT_DIR PROBLEM.py[:variant,...] ...

``--set`` changes a module constant of the built-in generator before writing (``_rowkernel.SPLIT_MIN_R=4096``),
to try a heuristic's threshold on the GPU before changing it; the files are then named ``__<variant>-<LABEL>``.

Each candidate lands as OUT_DIR/<problem stem>__<variant>.py (the variant the generator actually wrote is
read back from its attempt; a variant not on the problem's menu is skipped with a message). No variant list:
the default first candidate only.
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="MODULE.NAME=INT of tritonsmith.agents.builtin")
    ap.add_argument("--label", default="")
    ap.add_argument("out", type=Path)
    ap.add_argument("problems", nargs="+")
    args = ap.parse_args()
    for item in args.set:
        target, _, value = item.partition("=")
        mod_name, _, name = target.rpartition(".")
        mod = importlib.import_module(f"tritonsmith.agents.builtin.{mod_name}")
        if not hasattr(mod, name):
            raise SystemExit(f"--set: {mod_name} has no {name}")
        setattr(mod, name, int(value))
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    suffix = f"-{args.label}" if args.label else ""
    for arg in args.problems:
        path, _, wanted = arg.partition(":")
        problem = Problem.from_file(Path(path))
        for variant in (wanted.split(",") if wanted else [""]):
            t0 = time.time()
            req = GenerationRequest(problem=problem, iteration=0, device="cuda",
                                    tuned_variants=(variant,) if variant else ())
            cand = BuiltinGenerator().generate(req)
            got = cand.variant or "?"
            if variant and got != variant:
                print(f"{problem.name}: variant {variant} not on the menu (wrote {got}); skipped")
                continue
            if not cand.source:
                print(f"{problem.name} {variant}: no source: {(cand.note or '')[:200]}")
                continue
            dest = out / f"{Path(path).stem}__{got}{suffix}.py"
            dest.write_text(cand.source)
            print(f"{dest}  ({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
