"""Cheat: no Triton at all, PyTorch does the work (baseline wrapping). Problem: softmax.
Expected: rejected, rule no_triton_kernel."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softmax(x, dim=1)
