"""Prompt-time retrieval: is the first kernel a generator is shown from the problem's own family?

    .venv/bin/python benchmarks/prompt_retrieval.py [--level 1] [--label NAME]

The seed library (what a fresh install's memory holds) goes into an in-memory store; every problem of
``../shared/kernelbench-dev/levelN`` (labelled in benchmarks/kernelbench_families.csv) is retrieved for
exactly as the graph's ``retrieve`` node does it (``MemoryStore.similar``, k=3), and we count how often
the top-1 seed has the problem's family (seed families from the seeds' manifest; ``attention`` counts as
``matmul``). Families without a seed (pooling) cannot match and are reported apart. Appends a row to
benchmarks/results/prompt_retrieval.jsonl and prints a table.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import platform
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tritonsmith.tools.ports import MemoryStore
from tritonsmith.memory import InMemoryKernelMemory, seed_memory
from tritonsmith.memory._seeds import load_seeds
from tritonsmith.core.problem import Problem

ROOT = Path(__file__).resolve().parents[1]
# the dev split sits beside the checkout (../shared), or beside the worktrees' folder (../../shared)
DEV = next((d for d in (ROOT.parent / "shared" / "kernelbench-dev", ROOT.parent.parent / "shared" / "kernelbench-dev")
            if d.is_dir()), ROOT.parent / "shared" / "kernelbench-dev")
LABELS = ROOT / "benchmarks" / "kernelbench_families.csv"
OUT = ROOT / "benchmarks" / "results" / "prompt_retrieval.jsonl"
_SEED_FAMILY_ALIAS = {"attention": "matmul"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--label", default="", help="what this run measures (e.g. 'before', 'after')")
    args = ap.parse_args()
    memory = InMemoryKernelMemory()
    seed_memory(memory)
    store = MemoryStore(memory)
    family_of_seed = {f"seed/{s.name}": _SEED_FAMILY_ALIAS.get(s.family, s.family) for s in load_seeds()}
    seeded = set(family_of_seed.values())
    rows, misses = [], []
    with LABELS.open() as fh:
        for row in csv.DictReader(fh):
            if int(row["level"]) != args.level:
                continue
            problem = Problem.from_file(DEV / f"level{row['level']}" / f"{row['problem']}.py")
            hits = store.similar(problem, k=3)
            top = family_of_seed.get(hits[0].problem_name, "?") if hits else "none"
            rows.append((row["problem"], row["family"], top))
            if top != row["family"]:
                misses.append(f"{row['problem']} ({row['family']}) -> {hits[0].problem_name if hits else 'none'}")
    n = len(rows)
    hit = sum(1 for _, fam, top in rows if fam == top)
    possible = [r for r in rows if r[1] in seeded]
    hit_possible = sum(1 for _, fam, top in possible if fam == top)
    per_family = Counter(fam for _, fam, _ in rows)
    per_family_hit = Counter(fam for _, fam, top in rows if fam == top)
    record = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "label": args.label,
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "commit": _commit(),
        "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
        "level": args.level, "problems": n, "top1_same_family": hit / n if n else 0.0, "top1_hits": hit,
        "with_a_seed_of_their_family": len(possible), "top1_hits_among_those": hit_possible,
        "per_family": {f: f"{per_family_hit[f]}/{c}" for f, c in sorted(per_family.items())}, "misses": misses,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    print(f"| level | problems | top-1 same family | among families with a seed | per family |")
    print("| --- | --- | --- | --- | --- |")
    fams = ", ".join(f"{f} {v}" for f, v in record["per_family"].items())
    print(f"| {args.level} | {n} | {hit}/{n} ({hit / n:.0%}) | {hit_possible}/{len(possible)} | {fams} |")
    print("misses:", "; ".join(misses))
    return 0


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=ROOT, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
