"""Whole-model ops of the built-in generator: adaptive pooling (equal windows as a window kernel, varying
windows a torch call), ``F.interpolate`` (nearest by whole factors as a broadcast read, other modes torch
calls), ``split``/``chunk``/``unbind`` as slice views, ``repeat`` (InstanceNorm's affine weights), embedding
lookups (torch), recurrent cells with zero initial states (a product with a zero operand is a zero fill).
Each candidate is checked through the evaluator on the Triton interpreter at odd shapes."""

from __future__ import annotations

import re

import pytest

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem

_VISION = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.norm = nn.InstanceNorm2d(5, affine=True)
        self.avg = nn.AdaptiveAvgPool2d((3, 4))   # 9x12 -> 3x4: equal 3x3 windows
        self.max = nn.AdaptiveMaxPool2d((2, 5))   # 9x12 -> 2x5: windows of varying size

    def forward(self, x):
        y = F.hardswish(self.norm(self.conv(x)))
        up = F.interpolate(self.avg(y), scale_factor=3, mode="nearest")          # back to 9x12
        smooth = F.interpolate(self.max(y), size=(4, 6), mode="bilinear", align_corners=False)
        return torch.cat([(y - up).flatten(1), smooth.flatten(1) * 2.0], dim=1)


def get_inputs():
    return [torch.randn(2, 3, 9, 12)]


def get_init_inputs():
    return []
'''

_SEQUENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(13, 10)
        self.lstm = nn.LSTMCell(5, 7)
        self.gru = nn.GRUCell(7, 9)
        self.head = nn.Linear(9, 6)

    def forward(self, tokens):
        e = self.embed(tokens).sum(1)            # (batch, 10)
        a, b = e.split([5, 5], dim=1)
        h, c = self.lstm(a * torch.sigmoid(b))   # no state: zeros
        g = self.gru(torch.tanh(h) + c)          # no state: zeros
        q, k, v = self.head(g).chunk(3, dim=1)
        first, second = torch.stack([q * k, v], dim=0).unbind(0)
        return first - second


def get_inputs():
    return [torch.randint(0, 13, (4, 3))]


def get_init_inputs():
    return []
'''


def _write(source: str, name: str) -> tuple[Problem, str, str]:
    problem = Problem.from_source(source, name=name)
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert cand.source is not None, cand.note
    return problem, cand.source, cand.note


@pytest.mark.slow
def test_adaptive_pooling_interpolation_and_instance_norm_are_written_and_correct() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem, source, note = _write(_VISION, "vision_ops")
    assert "hybrid: torch ops remain: conv, adaptive_max_pool, interpolate_bilinear" in note
    assert "adaptive_avg_pool" not in note and "interpolate_nearest" not in note  # equal windows: Triton
    assert "window" in note
    result = evaluate(problem, source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()


@pytest.mark.slow
def test_cells_without_state_split_chunk_unbind_and_embedding_are_written_and_correct() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem, source, note = _write(_SEQUENCE, "sequence_ops")
    # the cells' GEMMs and gates are Triton: the embedding lookup is the only torch op
    assert re.search(r"hybrid: torch ops remain: embedding(;|$)", note), note
    result = evaluate(problem, source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()


def test_a_bug_while_listing_variants_is_an_error_candidate_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variant menu is built from the plan too: a failure there is ours, reported with its traceback."""
    import tritonsmith.agents.builtin._variants as variants

    def broken(plan: object) -> list[object]:
        raise KeyError("menu")

    monkeypatch.setattr(variants, "variant_menu", broken)
    cand = BuiltinGenerator().generate(GenerationRequest(problem=Problem.from_source(_SEQUENCE, name="menu_bug"),
                                                         iteration=1, device="cpu"))
    assert cand.source is None and cand.error is not None and "KeyError: 'menu'" in cand.error
    assert "internal error while planning" in cand.note


_MASKS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        keep = x > 0.25
        return torch.softmax(x.masked_fill(~keep, -1e4), dim=-1) * (~keep).float().mean()


def get_inputs():
    return [torch.randn(3, 5, 7)]


def get_init_inputs():
    return []
'''


def test_inverted_boolean_mask_is_written_and_correct() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem, source, _ = _write(_MASKS, "inverted_mask")
    result = evaluate(problem, source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()
