"""Cheat: the Triton kernel writes the right answer, then PyTorch overwrites all of it with its own
(the "baseline call" hack hidden behind a real kernel). Problem: silu_bias.
Expected: rejected, rule decorative_kernel (run time)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _silu_bias_kernel(x_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % cols, mask=mask)
    tl.store(out_ptr + offs, x * tl.sigmoid(x) + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        out = torch.empty_like(x)
        _silu_bias_kernel[(triton.cdiv(x.numel(), 256),)](x, self.bias, out, x.numel(), x.shape[-1], BLOCK=256)
        out.copy_(x.mul(torch.sigmoid(x)).add(self.bias))
        return out
