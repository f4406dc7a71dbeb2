"""The built-in generator reads the profiler's advice (the ``hints:`` line) to choose its next variant."""

from __future__ import annotations

import pytest

from tritonsmith.agents.base import Attempt, GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.agents.builtin._hints import NEAR_PEAK_NOTE, order_by_hints, profile_hints
from tritonsmith.agents.builtin._variants import Variant
from tritonsmith.core.problem import Problem
from tritonsmith.core.results import EvalResult, EvalStatus

MATMUL = Problem.from_source(
    "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, a, b):\n"
    "        return torch.relu(a @ b)\n\n\ndef get_inputs():\n    return [torch.randn(1031, 517), torch.randn(517, 771)]\n\n\n"
    "def get_init_inputs():\n    return []\n", name="matmul_relu")


def _result(status: EvalStatus) -> EvalResult:
    return EvalResult(status=status, message=status.value, problem="matmul_relu", device="cuda",
                      device_name="NVIDIA H200", tolerance="kernelbench")


def _attempt(variant: str, hints: str | None, status: EvalStatus = EvalStatus.CORRECT) -> Attempt:
    feedback = "correct on 5 trials; 0.81x vs torch.compile"
    if hints is not None:
        feedback += f"\n\nprofiler:\ncandidate: compute-bound at 41% of tf32\nnext: ...\nhints: {hints}"
    return Attempt(iteration=1, source="# kernel", result=_result(status), feedback=feedback, reward=0.45,
                   generator="builtin", variant=variant)


def _next_variant(history: list[Attempt]) -> str | None:
    return BuiltinGenerator().generate(GenerationRequest(problem=MATMUL, iteration=2, history=history)).variant


def test_profile_hints_come_from_the_latest_profiled_correct_attempt() -> None:
    history = [_attempt("default", "spills, few_programs"), _attempt("mm-128x128", None),
               _attempt("mm-64x128", "launch_bound", EvalStatus.WRONG_OUTPUT)]
    assert profile_hints(history) == ("spills", "few_programs")
    assert profile_hints([_attempt("default", None)]) == ()


def test_order_by_hints_is_stable_and_follows_the_first_actionable_code() -> None:
    menu = [Variant(k, k, {}, {}) for k in ("mm-128x128", "mm-128x256", "mm-64x128", "row-split")]
    assert [v.key for v in order_by_hints(menu, ("spills",))][0] == "mm-64x128"
    assert [v.key for v in order_by_hints(menu, ("unknown_code", "few_programs"))][0] == "row-split"
    assert [v.key for v in order_by_hints(menu, ())] == [v.key for v in menu]
    windows = [Variant(k, k, {}, {}) for k in ("window-4096", "window-256")]
    assert [v.key for v in order_by_hints(windows, ("few_programs",))][0] == "window-256"
    assert [v.key for v in order_by_hints(windows, ("memory_bound",))][0] == "window-4096"


@pytest.mark.parametrize("hints, expected", [(None, "mm-128x128"), ("spills", "mm-64x64"),
                                             ("few_programs, spills", "mm-64x64"), ("launch_bound", "mm-128x128"),
                                             ("compute_bound", "mm-128x128"), ("extra_dram_traffic", "mm-128x128")])
def test_next_variant_addresses_the_profile(hints: str | None, expected: str) -> None:
    """Menu order without a profile (or with advice no variant addresses); the advice's variant with one."""
    assert _next_variant([_attempt("default", hints)]) == expected


def test_near_peak_profile_ends_the_refinement() -> None:
    candidate = BuiltinGenerator().generate(GenerationRequest(problem=MATMUL, iteration=2,
                                                              history=[_attempt("default", "near_peak")]))
    assert candidate.source is None and candidate.exhausted
    assert NEAR_PEAK_NOTE in candidate.note
