"""``layout_at``: a value's strides and offset replayed at another leading size, against the layout of the same
reference traced at that size."""

from __future__ import annotations

import pytest

from tritonsmith.agents.builtin import _plan
from tritonsmith.agents.builtin._ir import VIEW, UnsupportedError
from tritonsmith.agents.builtin._partition import layout, layout_at
from tritonsmith.core.problem import Problem
from tritonsmith.evaluator._generalize import resized_problem

_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)[:, 1] * 2.0


def get_inputs():
    return [torch.randn(6, 3, 16)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("size", [5, 9])
def test_views_replayed_at_another_leading_size_match_that_sizes_trace(size: int) -> None:
    """Attention with batch_first views ``[L, B, 3E]`` as q, k, v (strides ``(B * 3E, 3E, 1)``) and the heads as
    ``[B * H, L, d]``: every view's layout at ``size``, replayed from the trace at 6, is the one the trace at
    ``size`` gives, offsets included (k and v start ``E`` and ``2E`` in)."""
    problem = Problem.from_source(_SOURCE, name="attention_views")
    _, plan = _plan(problem, {}, None)
    assert plan.lead is not None, plan.static_reason
    _, other = _plan(resized_problem(problem, size), {"static_shapes": True}, None)
    theirs = {n.id: n for n in other.graph.nodes}
    checked = held = 0
    for n in plan.graph.nodes:
        if n.kind != VIEW or n.id not in theirs:
            continue
        try:
            expected = layout(theirs[n.id], other.owner)[1:]
        except UnsupportedError:  # not a view of a stored value: no kernel reads it
            continue
        got = layout_at(n, plan.owner, plan.lead, size)
        assert got == expected, (n.id, n.shape, got, expected)
        checked += 1
        held += got != layout(n, plan.owner)[1:]  # a layout that changes with the leading size
    assert checked >= 10 and held >= 3, (checked, held)
