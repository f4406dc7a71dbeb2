"""Cheat: a decorative kernel through indirection: the Triton kernel computes into a buffer that is
never returned, and PyTorch functions reached by computed names produce the output.
Problem: silu_bias. Expected: rejected, rule decorative_kernel (run time)."""
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


_ops = {name: getattr(torch, name) for name in ("sig" + "moid", "m" + "ul", "a" + "dd")}


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        unused = torch.empty_like(x)
        _silu_bias_kernel[(triton.cdiv(x.numel(), 256),)](x, self.bias, unused, x.numel(), x.shape[-1], BLOCK=256)
        return _ops["add"](_ops["mul"](x, _ops["sigmoid"](x)), self.bias)
