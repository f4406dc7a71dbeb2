"""BatchNorm2d (training mode: batch statistics over N, H, W for each channel)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


batch = 32
channels = 64
height = 63
width = 65


def get_inputs():
    return [torch.randn(batch, channels, height, width) * 1.5 + 0.3]


def get_init_inputs():
    return [channels]
