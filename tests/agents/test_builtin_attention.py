"""Attention on the built-in generator: ``F.scaled_dot_product_attention``, the written-out
softmax(QK^T)V with heads split and merged back (a reshape of a transposed value needs a copy), and
``nn.TransformerEncoderLayer``; checked through the evaluator on the Triton interpreter."""

from __future__ import annotations

import pytest

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem

_ATTENTION = '''import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.layer = nn.TransformerEncoderLayer(d_model=dim, nhead=heads, dim_feedforward=2 * dim, dropout=0.0,
                                                batch_first=True)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(c // self.heads), dim=-1)
        y = (a + w @ v).transpose(1, 2).reshape(b, n, c)  # heads merged back: a copy
        return self.layer(self.proj(y) + x)


def get_inputs():
    return [torch.randn(3, 5, 12)]


def get_init_inputs():
    return [12, 3]
'''


@pytest.mark.slow
def test_attention_forms_are_written_and_verified() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem = Problem.from_source(_ATTENTION, name="attention")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert cand.source is not None, cand.note
    assert "hybrid" not in cand.note  # everything in Triton: matmuls, softmax rows, layer norms
    result = evaluate(problem, cand.source, device="cpu", trials=2, timeout_s=400)
    assert result.status.value == "correct", result.feedback()
