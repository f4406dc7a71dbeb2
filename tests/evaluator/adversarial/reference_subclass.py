"""Cheat: ModelNew inherits the reference Model (copied into the file) and launches a token kernel.
Problem: softmax. Expected: rejected, rule reference_model."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch_kernel(x_ptr):
    tl.load(x_ptr)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _touch_kernel[(1,)](x)
        return super().forward(x)
