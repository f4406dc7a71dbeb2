"""benchmarks/conv_bound.py: the FLOPs it counts for standard, grouped and transposed convolutions."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.benchmarks._scripts import load_script

conv_bound = load_script("conv_bound")

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{cls}(6, 10, (3, 5), stride={stride}, groups={groups})

    def forward(self, x):
        return self.conv(x)

def get_inputs():
    return [torch.randn(3, 6, 13, 17)]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("cls, stride, groups", [("Conv2d", 1, 1), ("Conv2d", 2, 2), ("ConvTranspose2d", 2, 2)])
def test_flops_are_two_per_multiply_add_of_the_convolution(tmp_path: Path, cls: str, stride: int, groups: int):
    path = tmp_path / "p.py"
    path.write_text(textwrap.dedent(PROBLEM.format(cls=cls, stride=stride, groups=groups)))
    if cls == "Conv2d":
        oh, ow = (13 - 3) // stride + 1, (17 - 5) // stride + 1
        expected = 2 * 3 * 10 * oh * ow * (6 // groups) * 15  # every output: Cin/g * taps multiply-adds
    else:
        expected = 2 * 3 * 6 * 13 * 17 * (10 // groups) * 15  # every input: Cout/g * taps multiply-adds
    assert conv_bound.conv_flops(path) == expected
