"""Batched matmul with a fused epilogue: relu(bmm(a, b) * scale)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.bmm(a, b) * self.scale)


batch = 64
m = 512
k = 256
n = 384


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return [0.125]
