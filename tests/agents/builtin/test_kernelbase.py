"""The shared kernel writer: a row kernel reads a value constant along its reduced dimensions once per row."""

from __future__ import annotations

import re
from pathlib import Path

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem

from _builtin_check import run_on_interpreter

_BN = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 13, 3)
        self.bn = nn.BatchNorm2d(13)
        self.ln = nn.LayerNorm(9)

    def forward(self, x):
        y = self.bn(self.conv(x)) * 1.7
        return self.ln(y)


def get_inputs():
    return [torch.randn(5, 3, 11, 11)]


def get_init_inputs():
    return []
'''


def test_per_channel_values_are_read_by_row_and_the_kernels_stay_correct(tmp_path: Path) -> None:
    """BatchNorm's weight and bias, and the convolution's bias folded into its statistics, vary only along the
    kept channel: loaded by ``k`` (one value per row), not gathered per element through ``(lin // HW) % C``
    (H100 AOT: 26 scalar loads per loop iteration of 73_Conv2d_BatchNorm_Scaling's apply kernel, 5 now). The
    LayerNorm's weight varies along its reduced dimension: still read by element."""
    problem = Problem.from_source(_BN, name="conv_bn_ln")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0))
    assert cand.source is not None, cand.note
    loads = re.findall(r"tl\.load\((in\d+_ptr) \+ ([^,]+), mask=(\w+)", cand.source)
    by_row = {ptr for ptr, idx, mask in loads if idx == "k" and mask == "kmask"}
    assert len(by_row) >= 3, loads  # conv bias, BatchNorm weight, BatchNorm bias
    assert not any("% 13" in idx for _, idx, _ in loads), loads  # no per-element channel gather is left
    assert any("% 9" in idx or idx.endswith("lin") for _, idx, _ in loads)  # the LayerNorm's per-element reads
    checked = run_on_interpreter(tmp_path, {"conv_bn_ln": (_BN, cand.source)})
    assert checked["conv_bn_ln"]["ok"], checked["conv_bn_ln"]["detail"]
