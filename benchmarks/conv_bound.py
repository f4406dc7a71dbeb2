"""How far each level-1 convolution kernel is from what fp32 accuracy allows against cuDNN (issue 19).

cuDNN runs PyTorch's float32 convolutions in TF32 (one tensor-core pass, ~1e-3 relative error); the evaluator
wants float32 accuracy (kernelbench's 1e-4), which our implicit GEMMs get with tf32x3: three passes. At the
same tensor-core efficiency as cuDNN a tf32x3 kernel therefore takes 3x cuDNN's time: **1/3 of cuDNN's speed
is the bound**, and "vs bound" below is our speed over that bound (1.0 = as efficient as cuDNN per pass).
"tf32 rate for 0.9x compile" is the tensor-core rate (TFLOP/s of tf32 passes) a tf32x3 kernel would need to run at
0.9x torch.compile (issue 19's floor; torch.compile calls the same cuDNN convolution): 2.7x the FLOPs over
torch.compile's time. The H200's nominal dense tf32 peak is ~495 TFLOP/s (a specification figure, not measured here).

FLOPs are counted from the problem's convolution (2 per multiply-add: standard ``out * Cin/g * taps``,
transposed ``in * Cout/g * taps``), shapes from a meta-device run. Times are a suite run's (GPU-measured);
nothing is timed here.

    python3 benchmarks/conv_bound.py KERNELBENCH/level1 RESULTS.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from tritonsmith.core.modload import import_file

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def conv_flops(path: Path) -> float:
    """Multiply-add FLOPs of the problem's convolution(s), from shapes on the meta device."""
    mod = import_file(path)
    with torch.device("meta"):
        model = mod.Model(*mod.get_init_inputs())
        inputs = mod.get_inputs()
    flops = 0.0

    def count(m: Any, args: tuple[Any, ...], out: torch.Tensor) -> None:
        nonlocal flops
        taps = math.prod(m.kernel_size)
        if isinstance(m, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
            flops += 2.0 * args[0].numel() * (m.out_channels // m.groups) * taps
        else:
            flops += 2.0 * out.numel() * (m.in_channels // m.groups) * taps

    for m in model.modules():
        if isinstance(m, _CONVS):
            m.register_forward_hook(count)
    with torch.no_grad():
        model(*inputs)
    return flops


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("level1", type=Path)
    ap.add_argument("results", type=Path)
    args = ap.parse_args()
    rows = [json.loads(x) for x in args.results.read_text().splitlines() if x.strip()]
    print("| problem | GFLOP | cuDNN ms | cuDNN TFLOP/s | ours ms | ours TFLOP/s | vs cuDNN | vs bound (1/3 cuDNN) "
          "| tf32 rate for 0.9x compile |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: int(r["problem"].split("_")[0])):
        if r["level"] != 1 or "conv" not in r["problem"] or r["status"] != "correct":
            continue
        b = r["result"]["benchmark"]
        ours, cudnn, compiled = b["candidate"]["median_ms"], b["eager"]["median_ms"], b["compiled"]["median_ms"]
        f = conv_flops(args.level1 / f"{r['problem']}.py")
        vs = cudnn / ours
        print(f"| {r['problem'][:44]} | {f / 1e9:.0f} | {cudnn:.3f} | {f / cudnn / 1e9:.0f} | {ours:.3f} | "
              f"{f / ours / 1e9:.0f} | {vs:.2f}x | {3 * vs:.2f} | {2.7 * f / compiled / 1e9:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
