"""RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * weight."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(features) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


tokens = 8192
features = 2047


def get_inputs():
    return [torch.randn(tokens, features)]


def get_init_inputs():
    return [features]
