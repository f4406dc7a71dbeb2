import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise softmax of a (batch, dim) matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 129
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
