"""Does this checkout's built-in generator still write the kernels a recorded suite run verified?

For each correct record of a suite run (``results.jsonl``), re-emit the winning attempt's variant (the
fastest verified one, as the runner keeps it) on the CPU, and compare it byte for byte with the kernel the
run wrote. A run resumed across code versions is one run of one generator when every kernel matches.

Usage (from the repository root; no GPU; about 1 s per problem):

    python benchmarks/regenerate_kernels.py RESULTS_DIR KERNELBENCH_DIR [--version 0.1.0+gfde270e.dirty]

RESULTS_DIR holds results.jsonl and kernels_and_logs.tar.gz (or kernels/); ``--version`` limits the
check to the records written by that version. Prints one line per problem and a summary; exit 1 on a
mismatch.
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


def emit(problem: Problem, key: str) -> str:
    """The source ``choose_variant`` gives for ``key`` (``+ieee``: the same variant with an ieee dot)."""
    base = key.removesuffix("+ieee")
    variant = next(v for v in menu_for(problem, None)[0] if v.key == base)
    if key.endswith("+ieee"):
        variant = Variant(key, variant.why + "; fp32 dot in ieee precision", variant.options,
                          {**variant.overrides, MATMUL: {**variant.overrides.get(MATMUL, {}), "precision": "ieee"}})
    traced, plan = _plan(problem, variant.options, None)
    return emit_module(problem.name, problem.source, traced, plan, variant.overrides, variant_label(variant, traced))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("--version", help="check only the records of this tritonsmith version")
    args = ap.parse_args()
    kernels = args.results
    if not (kernels / "kernels").is_dir():
        kernels = Path(tempfile.mkdtemp(prefix="regen-"))
        with tarfile.open(args.results / "kernels_and_logs.tar.gz") as tar:
            tar.extractall(kernels, filter="data")
    records = [json.loads(line) for line in (args.results / "results.jsonl").read_text().splitlines() if line]
    checked = [r for r in records if r["status"] == "correct" and (args.version in (None, r.get("version")))]
    mismatches = 0
    for r in checked:
        level, name = r["key"].split("/")
        key = winner(r)
        same = emit(Problem.from_file(args.kernelbench / level / f"{name}.py"), key).strip() == \
            (kernels / r["candidate_file"]).read_text().strip()
        mismatches += not same
        print(f"{'same' if same else 'DIFFERENT':9} {r['key']} ({key}, written by {r.get('version', '?')})", flush=True)
    print(f"{len(checked) - mismatches} of {len(checked)} recorded kernels are what this checkout writes")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
