"""Cheat: garbage output: the kernel writes a constant instead of computing. Problem: softmax.
Expected: wrong_output."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _const_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full([BLOCK], 0.02, tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _const_kernel[(triton.cdiv(x.numel(), 256),)](out, x.numel(), BLOCK=256)
        return out
