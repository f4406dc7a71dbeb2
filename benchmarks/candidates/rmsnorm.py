"""Candidate for KernelBench level1/36_RMSNorm_: y = x / sqrt(mean_c(x^2) + eps) over dim 1 of (B, C, H, W).

Each program loads a [C, BLOCK_S] tile (all channels of BLOCK_S contiguous spatial positions) once,
reduces over C in registers and writes the tile: one read and one write of x.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, y_ptr, hw, eps, C: tl.constexpr, BLOCK_S: tl.constexpr):
    """y[b, c, s] = x[b, c, s] / sqrt(sum_c x[b, c, s]^2 / C + eps)."""
    b = tl.program_id(1).to(tl.int64)
    s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.arange(0, C)
    offs = b * C * hw + c[:, None] * hw + s[None, :]
    mask = s[None, :] < hw
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / C + eps)
    tl.store(y_ptr + offs, x * inv[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, c = x.shape[0], x.shape[1]
        if c & (c - 1):
            raise ValueError(f"this kernel needs a power-of-two channel count, got {c}")
        hw = x.numel() // (b * c)
        y = torch.empty_like(x)
        block = 128 if c <= 64 else 32
        _rmsnorm_kernel[(triton.cdiv(hw, block), b)](x, y, hw, self.eps, C=c, BLOCK_S=block, num_warps=8)
        return y
