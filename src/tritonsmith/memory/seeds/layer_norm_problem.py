"""LayerNorm over the last dimension, with learned weight and bias."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():  # non-trivial affine parameters, so a kernel that ignores them fails
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


tokens = 8192
features = 1535


def get_inputs():
    return [torch.randn(tokens, features) * 2.0 + 0.5]


def get_init_inputs():
    return [features]
