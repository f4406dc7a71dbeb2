"""The kernel memory's per-shape tuning cache: the variants measured fastest for this exact problem come first."""

from __future__ import annotations

import re

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator, menu_for, tuned_first
from tritonsmith.core.problem import Problem

_GEMM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(67, 45)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 0.5


def get_inputs():
    return [torch.randn(29, 67)]


def get_init_inputs():
    return []
'''


def _variant(source: str | None) -> str:
    assert source is not None
    found = re.search(r"^Variant: (\S+)", source, re.MULTILINE)
    assert found, "the module header names its variant"
    return found.group(1)


def test_the_tuned_variant_is_written_first_and_the_rest_follow_in_menu_order():
    problem = Problem.from_source(_GEMM, name="gemm_relu")
    menu = [v.key for v in menu_for(problem, None)[0]]
    assert len(menu) >= 2, menu
    tuned = menu[-1]  # the menu's last idea, measured fastest before
    plain = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    first = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu",
                                                          tuned_variants=(tuned,)))
    assert _variant(plain.source) == menu[0]
    assert _variant(first.source) == tuned


def test_tuned_first_keeps_the_menu_and_ignores_unknown_keys():
    class V:
        def __init__(self, key: str) -> None:
            self.key = key

    menu = [V("default"), V("mm-128x128"), V("mm-aligned"), V("ieee")]
    order = [v.key for v in tuned_first(menu, ["gone-variant", "mm-aligned+ieee", "mm-128x128", "mm-aligned"])]
    assert order == ["mm-aligned", "mm-128x128", "default", "ieee"]
    assert [v.key for v in tuned_first(menu, [])] == ["default", "mm-128x128", "mm-aligned", "ieee"]
