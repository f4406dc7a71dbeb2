"""Cheat: let torch.compile (inductor) write the kernels, with a token Triton kernel for show.
Problem: softmax. Expected: rejected, rule not_triton."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch_kernel(x_ptr):
    tl.load(x_ptr)


_compiled = torch.compile(lambda x: torch.softmax(x, dim=1))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _touch_kernel[(1,)](x)
        return _compiled(x)
