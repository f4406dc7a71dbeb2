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
    # the LayerNorm's weight and bias, per element: by the reduced coordinate ``r`` itself (``_exprs.Digits``),
    # not by ``lin % 9``
    assert sum(idx == "r" and mask == "mask" for _, idx, mask in loads) >= 2, loads
    checked = run_on_interpreter(tmp_path, {"conv_bn_ln": (_BN, cand.source)})
    assert checked["conv_bn_ln"]["ok"], checked["conv_bn_ln"]["detail"]


_DENSE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(8)
        self.conv1 = nn.Conv2d(8, 3, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(11)
        self.conv2 = nn.Conv2d(11, 3, 3, padding=1)
        self.bn3 = nn.BatchNorm2d(14)

    def forward(self, x):
        a = self.conv1(torch.relu(self.bn1(x)))
        f = torch.cat([x, a], 1)
        b = self.conv2(torch.relu(self.bn2(f)))
        g = torch.cat([x, a, b.transpose(2, 3)], 1)
        return torch.relu(self.bn3(g)) * 0.5


def get_inputs():
    return [torch.randn(3, 8, 7, 7) * 2.0 + 0.3]


def get_init_inputs():
    return []
'''


def test_a_concatenation_along_the_rows_is_chosen_once_per_row_and_stays_correct(tmp_path: Path) -> None:
    """A DenseNet block's BatchNorm over ``cat(features, 1)``: the rows are channels, so each row's source pointer
    and batch stride are chosen per row (``q``/``o`` tiles) and no element divides ``lin`` to find its channel;
    a source read through a transpose is not contiguous, so that concatenation takes the per-element path, with
    its channel still the row ``k``. Sources of 8 and 3 channels (different batch strides), odd sizes."""
    problem = Problem.from_source(_DENSE, name="dense_block")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0))
    assert cand.source is not None, cand.note
    src = cand.source
    assert re.search(r"o\d+ = tl\.where\(\(c\d+ >= 8\), 147, o\d+\)", src), src  # 3 channels x 49: the batch stride
    assert re.search(r"tl\.load\(q\d+ \+ \(r // 49\) \* o\d+ \+ \(r % 49\), mask=mask", src), src
    assert re.search(r"c\d+ = k  # index along cat dim 1", src), src
    assert "// 49) % 14" not in src and "// 49) % 11" not in src  # no channel found by dividing lin
    assert re.search(r"p\d+ = tl\.where\(sel\d+_2,", src), src  # the transposed source: per element
    checked = run_on_interpreter(tmp_path, {"dense_block": (_DENSE, src)})
    assert checked["dense_block"]["ok"], checked["dense_block"]["detail"]
