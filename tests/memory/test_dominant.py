"""Retrieval ranks by the problem's dominant op class: contractions and row reductions over elementwise glue."""

from __future__ import annotations

import pytest

from tritonsmith.tools.ports import MemoryStore
from tritonsmith.memory import InMemoryKernelMemory, seed_memory
from tritonsmith.memory._dominant import (
    CLASS_WEIGHT,
    EXTRA_WEIGHT,
    RELATED_WEIGHT,
    class_affinity,
    dominant_class,
    op_affinity,
)
from tritonsmith.core.problem import Problem


@pytest.mark.parametrize(("ops", "cls"), [
    (("mm",), "matmul"), (("bmm", "mul", "relu"), "matmul"), (("convolution", "add", "relu"), "conv"),
    (("max_pool2d_with_indices",), "pooling"), (("_softmax",), "normalization"), (("logsumexp",), "normalization"),
    (("abs", "mean", "div"), "reduction"), (("relu",), "elementwise"), (("view", "permute"), None), ((), None),
])
def test_dominant_class(ops, cls):
    assert dominant_class(ops) == cls


def test_affinity():
    assert class_affinity("matmul", "matmul") == CLASS_WEIGHT
    assert op_affinity(("mm",), ("bmm", "_softmax", "bmm")) == CLASS_WEIGHT - EXTRA_WEIGHT  # attention for a matmul
    assert op_affinity(("mm",), ("addmm", "relu")) == CLASS_WEIGHT and op_affinity((), ("mm",)) == 0.0
    assert class_affinity("reduction", "normalization") == RELATED_WEIGHT
    assert class_affinity("matmul", "normalization") == 0.0 and class_affinity(None, "matmul") == 0.0


def _problem(body: str, inputs: str) -> Problem:
    return Problem.from_source(f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                               f"    def forward(self, *xs):\n        return {body}\n\n\n"
                               f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n",
                               name="q")


@pytest.mark.parametrize(("body", "inputs", "family"), [
    ("torch.matmul(xs[0], xs[1])", "[torch.randn(257, 129), torch.randn(129, 65)]", {"linear_bias_relu", "bmm_scale_relu"}),
    ("torch.logsumexp(xs[0], dim=1)", "[torch.randn(64, 8191)]", {"softmax", "log_softmax", "layer_norm", "rms_norm",
                                                                  "batch_norm", "row_sum"}),
    ("torch.sigmoid(xs[0]) * 2.0", "[torch.randn(33, 4097)]", {"elementwise_chain"}),
])
def test_the_prompt_examples_start_with_the_dominant_class(body, inputs, family):
    memory = InMemoryKernelMemory()
    seed_memory(memory)
    top = MemoryStore(memory).similar(_problem(body, inputs), k=3)[0]
    assert top.problem_name.removeprefix("seed/") in family, top
