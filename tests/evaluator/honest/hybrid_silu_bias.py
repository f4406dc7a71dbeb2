"""Honest hybrid candidate: PyTorch keeps the sigmoid, a Triton kernel fuses x * s + bias.
Problem: silu_bias. Expected: correct (the kernel contributes: without it the output is unwritten)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mul_add_kernel(x_ptr, s_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % cols, mask=mask)
    tl.store(out_ptr + offs, x * s + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        s = torch.sigmoid(x)
        out = torch.empty_like(x)
        _mul_add_kernel[(triton.cdiv(x.numel(), 256),)](x, s, self.bias, out, x.numel(), x.shape[-1], BLOCK=256)
        return out
