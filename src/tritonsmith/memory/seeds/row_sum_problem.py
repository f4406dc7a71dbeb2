"""Row reduction: sum over the last dimension."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


rows = 16384
cols = 3001


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
