"""Ops of windowed vision transformers (Swin): ``torch.roll`` (a concatenation of two slices), ``F.pad``
(a concatenation with fills), adaptive average pooling to 1 (an ``as_strided`` re-striding), indexing a
table by a buffer (a torch call), arithmetic on tensor constants (folded), and a model whose ``__init__``
reads values (built on the CPU instead of the meta device); checked through the evaluator on the interpreter."""

from __future__ import annotations

import pytest

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem

_WINDOW_OPS = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        steps = [x.item() for x in torch.linspace(0, 1, 3)]  # .item() in __init__: no meta-device build
        self.scale = steps[1] + 1.0
        self.table = nn.Parameter(torch.randn(9, 2))
        self.register_buffer("index", torch.randint(0, 9, (n * n,)))
        self.pool = nn.AdaptiveAvgPool1d(1)

    def forward(self, x):
        y = torch.roll(x, shifts=(-2, 3), dims=(1, 2)) * self.scale
        y = F.pad(y, (1, 2, 0, 1), value=0.5)
        bias = self.table[self.index].view(-1, 2).sum()
        limit = torch.log(torch.tensor(1.0 / 0.01))
        z = torch.clamp(y + bias, max=limit)
        return self.pool(z.flatten(2)).squeeze(-1)


def get_inputs():
    return [torch.randn(2, 5, 7)]


def get_init_inputs():
    return [3]
'''


@pytest.mark.slow
def test_window_transformer_ops_are_written_and_verified() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem = Problem.from_source(_WINDOW_OPS, name="window_ops")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert cand.source is not None, cand.note
    assert "torch ops remain: index" in cand.note
    result = evaluate(problem, cand.source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()


def test_depthwise_conv_on_a_one_by_one_map(tmp_path) -> None:  # noqa: ANN001 - pytest's tmp_path
    """EfficientNet's blocks pool to 1x1 before a strided 3x3 depthwise conv: the window start is a constant
    there, and masks built from a constant were Python booleans ('mask has unsupported dtype')."""
    from _builtin_check import run_on_interpreter

    src = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n"
           "        self.dw = nn.Conv2d(6, 6, 3, stride=2, padding=1, groups=6, bias=False)\n\n"
           "    def forward(self, x):\n        return F.relu(self.dw(F.adaptive_avg_pool2d(x, (1, 1))))\n\n"
           "def get_inputs():\n    return [torch.randn(3, 6, 5, 7)]\n\ndef get_init_inputs():\n    return []\n")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=Problem.from_source(src, name="dw1"), iteration=1))
    assert cand.source is not None and "window" in cand.note, cand.note
    out = run_on_interpreter(tmp_path, {"dw1": (src, cand.source)})
    assert out["dw1"]["ok"], out["dw1"]["detail"]
