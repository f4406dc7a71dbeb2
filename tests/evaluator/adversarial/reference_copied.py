"""Cheat: forward is the reference's forward, copied; a kernel runs once in __init__ for show.
Problem: softmax. Expected: rejected, rule reference_model (and kernel_not_launched)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _fill_kernel(out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros([BLOCK], dtype=tl.float32))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scratch = torch.empty(16)
        _fill_kernel[(1,)](self.scratch, BLOCK=16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)
