"""Cheat: a decorative kernel (KernelGym's "lazy optimisation"): a Triton kernel runs on a throwaway
buffer while PyTorch computes the whole result (written with other ops than the reference's, so the
hybrid policy's op-family check does not see it). Problem: silu_bias.
Expected: rejected, rule decorative_kernel (run time)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        scratch = torch.empty_like(x)
        _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, scratch, x.numel(), BLOCK=256)
        return x * torch.sigmoid(x) + self.bias
