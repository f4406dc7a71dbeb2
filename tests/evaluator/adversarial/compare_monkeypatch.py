"""Cheat: make every comparison pass by replacing torch.isclose/allclose, through vars() to slip past
a naive attribute check. Problem: softmax. Expected: rejected, rule monkeypatch."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch_kernel(x_ptr):
    tl.load(x_ptr)


vars(torch)["isclose"] = lambda a, b, **kw: torch.ones_like(a, dtype=torch.bool)
vars(torch)["allclose"] = lambda *a, **kw: True


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _touch_kernel[(1,)](x)
        return torch.empty_like(x)
