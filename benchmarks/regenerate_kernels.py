"""Does this checkout's built-in generator still write the kernels a recorded suite run verified?

For each correct record of a suite run (``results.jsonl``), re-emit the winning attempt's variant (the
fastest verified one, as the runner keeps it) on the CPU, and compare it byte for byte with the kernel the
run wrote. A run resumed across code versions is one run of one generator when every kernel matches.

Usage (from the repository root; no GPU; about 1 s per problem, 2 s without ``--static-shapes``):

    python benchmarks/regenerate_kernels.py RESULTS_DIR KERNELBENCH_DIR [--static-shapes] [--version V]

RESULTS_DIR holds results.jsonl and kernels_and_logs.tar.gz (or kernels/); ``--version`` limits the
check to the records written by that version. ``--static-shapes`` writes every kernel specialised to the
reference's shapes (the generator's ``static-shapes`` option, as all kernels were before shape-generic
launchers): the check that the measured kernels are still what the generator writes; exit 1 on a
mismatch. Without it the kernels are written as the generator writes them now (shape-generic where it
can), and the script reports which differ from the recorded ones and why they stay specialised.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from tritonsmith.agents.builtin import _plan, menu_for, variant_label  # noqa: E402
from tritonsmith.agents.builtin._emit import emit_module  # noqa: E402
from tritonsmith.agents.builtin._variants import MATMUL, Variant  # noqa: E402
from tritonsmith.core.problem import Problem  # noqa: E402


def winner(record: dict[str, Any]) -> str:
    correct = [a for a in record["attempts"] if a["status"] == "correct"]
    return max(correct, key=lambda a: a["speedup_vs_compile"] or 0.0)["variant"]


def emit(problem: Problem, key: str, static: bool = False) -> tuple[str, str]:
    """The source ``choose_variant`` gives for ``key`` (``+ieee``: the same variant with an ieee dot), and
    why its kernels are shape-specialised ("" where they take the leading size at run time)."""
    base = key.removesuffix("+ieee")
    fixed = {"static_shapes": True} if static else {}
    variant = next(v for v in menu_for(problem, None, options=fixed)[0] if v.key == base)
    if key.endswith("+ieee"):
        variant = Variant(key, variant.why + "; fp32 dot in ieee precision", variant.options,
                          {**variant.overrides, MATMUL: {**variant.overrides.get(MATMUL, {}), "precision": "ieee"}})
    traced, plan = _plan(problem, {**variant.options, **fixed}, None)
    source = emit_module(problem.name, problem.source, traced, plan, variant.overrides, variant_label(variant, traced))
    return source, "" if plan.lead is not None else (plan.static_reason or "asked for")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("--version", help="check only the records of this tritonsmith version")
    ap.add_argument("--static-shapes", action="store_true",
                    help="write the kernels specialised to the reference's shapes (the recorded kernels' form)")
    args = ap.parse_args()
    kernels = args.results
    if not (kernels / "kernels").is_dir():
        kernels = Path(tempfile.mkdtemp(prefix="regen-"))
        with tarfile.open(args.results / "kernels_and_logs.tar.gz") as tar:
            tar.extractall(kernels, filter="data")
    records = [json.loads(line) for line in (args.results / "results.jsonl").read_text().splitlines() if line]
    checked = [r for r in records if r["status"] == "correct" and (args.version in (None, r.get("version")))]
    mismatches, generic = 0, 0
    for r in checked:
        level, name = r["key"].split("/")
        key = winner(r)
        source, fixed = emit(Problem.from_file(args.kernelbench / level / f"{name}.py"), key, args.static_shapes)
        same = source.strip() == (kernels / r["candidate_file"]).read_text().strip()
        mismatches += not same
        generic += not fixed
        shapes = "" if args.static_shapes else (" shape-generic" if not fixed else f" shape-specialised: {fixed}")
        print(f"{'same' if same else 'DIFFERENT':9} {r['key']} ({key}, written by {r.get('version', '?')}){shapes}",
              flush=True)
    print(f"{len(checked) - mismatches} of {len(checked)} recorded kernels are what this checkout writes"
          + ("" if args.static_shapes else f" ({generic} of {len(checked)} written shape-generic)"))
    if not args.static_shapes:
        return 0  # shape-generic kernels differ from the recorded ones by design: a report, not a check
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
