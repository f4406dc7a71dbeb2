"""The level-1 convolution problems of suite runs: the verified Triton kernel's time against cuDNN's (issue 19).

    python benchmarks/conv_vs_cudnn_table.py RESULTS.jsonl [RESULTS.jsonl ...] [--kernels DIR ...]

Reads suite ``results.jsonl`` files (a later file's row replaces an earlier one's for the same problem) and
prints a Markdown table of every level-1 problem whose name holds ``conv``: status, the candidate's median
device time, eager PyTorch's (cuDNN; TF32 unless the flags were changed), torch.compile's, and the ratios.
With ``--kernels`` (the run folders' ``kernels/`` trees) each row also says whether the verified kernel runs
its convolution in Triton or still calls torch for it. Nothing is measured here: the figures are the runs'.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

_TORCH_CONV = re.compile(r"\bF\.conv(?:_transpose)?[123]d\(|\btorch\.(?:nn\.functional\.)?conv")


def load(paths: list[Path]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["key"]] = row
    return rows


def kernel_kind(key: str, kernel_dirs: list[Path]) -> str:
    """``Triton`` when the recorded kernel launches no torch convolution, ``torch`` when it does, else ``?``."""
    for d in reversed(kernel_dirs):
        path = d / f"{key}.py"
        if path.exists():
            return "torch" if _TORCH_CONV.search(path.read_text()) else "Triton"
    return "?"


def table(rows: dict[str, dict[str, Any]], kernel_dirs: list[Path]) -> list[str]:
    out = ["| problem | status | convolution in | kernel ms | cuDNN (eager) ms | torch.compile ms | vs cuDNN | "
           "vs torch.compile | version |", "|---|---|---|---|---|---|---|---|---|"]
    ratios: list[tuple[float, float]] = []
    for key, row in sorted(rows.items(), key=lambda kv: int(kv[1]["problem"].split("_")[0])):
        if row["level"] != 1 or "conv" not in row["problem"].lower():
            continue
        bench = ((row.get("result") or {}).get("benchmark") or {})
        if row["status"] != "correct" or not bench:
            out.append(f"| {row['problem']} | {row['status']} | | | | | | | {row.get('version', '')} |")
            continue
        cand, eager, comp = (bench[k]["median_ms"] for k in ("candidate", "eager", "compiled"))
        ratios.append((eager / cand, comp / cand))
        out.append(f"| {row['problem']} | correct | {kernel_kind(key, kernel_dirs)} | {cand:.3f} | {eager:.3f} | "
                   f"{comp:.3f} | {eager / cand:.2f}x | {comp / cand:.2f}x | {row.get('version', '')} |")
    if ratios:
        geo = [math.exp(sum(math.log(r[i]) for r in ratios) / len(ratios)) for i in (0, 1)]
        out.append(f"\n{len(ratios)} verified; geomean {geo[0]:.2f}x cuDNN, {geo[1]:.2f}x torch.compile; "
                   f"{sum(r[0] >= 1.0 for r in ratios)} at least as fast as cuDNN.")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--kernels", type=Path, nargs="*", default=[], help="run folders' kernels/ trees, same order")
    args = ap.parse_args()
    print("\n".join(table(load(args.results), args.kernels)))


if __name__ == "__main__":
    main()
