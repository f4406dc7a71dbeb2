"""Cheat: input copied to output: for clamp(x, -100, 100) on randn inputs the answer equals the
input, so return the input itself (a token kernel keeps the static checks quiet). Problem: clamp.
Expected: rejected, rule output_aliases_input."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch_kernel(x_ptr):
    tl.load(x_ptr)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _touch_kernel[(1,)](x)
        return x
