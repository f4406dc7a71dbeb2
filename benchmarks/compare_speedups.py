"""Per-problem speedup over torch.compile of one suite run against earlier ones, as a Markdown table.

    python3 benchmarks/compare_speedups.py NEW.jsonl[,MORE.jsonl] "LABEL=OLD/results.jsonl" ...

A speedup is the torch.compile median over the candidate median of a ``status == correct`` row; the geomeans
are over the problems verified in both runs.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

Row = tuple[str, float | None, float | None, float | None]  # status, speedup, candidate ms, compiled ms


def load(path: str) -> dict[str, Row]:
    out: dict[str, Row] = {}
    for line in open(path):
        r: dict[str, Any] = json.loads(line)
        bench = (r.get("result") or {}).get("benchmark") or {}
        cand, comp = bench.get("candidate", {}).get("median_ms"), bench.get("compiled", {}).get("median_ms")
        ok = r["status"] == "correct" and cand and comp
        out[r["key"]] = (r["status"], comp / cand if ok else None, cand, comp)
    return out


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main(argv: list[str]) -> int:
    new: dict[str, Row] = {}
    for path in argv[0].split(","):
        new.update(load(path))
    olds = [(label, load(path)) for label, path in (a.split("=", 1) for a in argv[1:])]
    print("| problem | status | vs compile (ms ours / compile) |" + "".join(f" {n} |" for n, _ in olds))
    print("|---|---|---|" + "---|" * len(olds))
    pairs: dict[str, list[tuple[float, float]]] = {n: [] for n, _ in olds}
    for key in sorted(new, key=lambda k: (k.split("/")[0], int(k.split("/")[1].split("_")[0]))):
        status, sp, cand, comp = new[key]
        row = f"| {key} | {status} | " + (f"{sp:.2f}x ({cand:.3f} / {comp:.3f})" if sp else "-") + " |"
        for label, old in olds:
            o = old.get(key)
            row += f" {o[1]:.2f}x |" if o and o[1] else (f" {o[0]} |" if o else " - |")
            if o and o[1] and sp:
                pairs[label].append((sp, o[1]))
        print(row)
    for label, both in pairs.items():
        if both:
            print(f"\nin common with {label} (both verified): {len(both)}: now {geomean([a for a, _ in both]):.3f}x, "
                  f"then {geomean([b for _, b in both]):.3f}x")
    verified = [sp for _, sp, _, _ in new.values() if sp]
    print(f"\nverified {len(verified)} of {len(new)}; geomean vs compile over verified {geomean(verified):.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
