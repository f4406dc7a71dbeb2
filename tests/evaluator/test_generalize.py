"""The evaluator's ``generalize`` option: a verified candidate checked again with the inputs' leading
dimension halved and at an odd size (on the CPU interpreter, for real)."""

from __future__ import annotations

from pathlib import Path

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem, load_problem
from tritonsmith.evaluator._generalize import leading_sizes, resized_problem
from tritonsmith.evaluator._evaluate import evaluate

RUN = {"device": "cpu", "trials": 1, "timeout_s": 300}


def test_leading_sizes_are_half_and_odd_and_never_the_original() -> None:
    assert leading_sizes(10) == (5, 9)
    assert leading_sizes(16) == (8, 15)
    assert leading_sizes(129) == (64, 127)
    assert leading_sizes(2) == (1, 3)
    assert leading_sizes(1) == (2, 3)
    for lead in range(1, 40):
        sizes = leading_sizes(lead)
        assert len(sizes) == 2 and lead not in sizes and any(s % 2 for s in sizes)


def test_resized_problem_changes_only_batched_inputs(tmp_path: Path) -> None:
    import torch

    from tritonsmith.core.problem_meta import exec_reference

    src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x, w, k):\n"
           "        return x @ w * k\n\ndef get_inputs():\n    return [torch.randn(6, 3), torch.randn(3, 4), 2.0]\n\n"
           "def get_init_inputs():\n    return []\n")
    for size in (3, 11):  # smaller and larger than the original 6
        module = exec_reference(resized_problem(Problem.from_source(src, name="mm"), size).source, "mm")
        x, w, k = module.get_inputs()
        assert x.shape == (size, 3) and w.shape == (3, 4) and k == 2.0
        assert torch.isfinite(x).all() and x.std() > 0.1  # the reference's own distribution, not zeros


def test_resized_problem_first_only_resizes_the_first_tensor_input_alone() -> None:
    from tritonsmith.core.problem_meta import exec_reference

    src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, k, a, x):\n"
           "        return a @ x * k\n\ndef get_inputs():\n    return [2.0, torch.randn(6, 6), torch.randn(6, 1)]\n\n"
           "def get_init_inputs():\n    return []\n")
    problem = Problem.from_source(src, name="matvec")
    k, a, x = exec_reference(resized_problem(problem, 5, first_only=True).source, "matvec").get_inputs()
    assert k == 2.0 and a.shape == (5, 6) and x.shape == (6, 1)
    _, a, x = exec_reference(resized_problem(problem, 5).source, "matvec").get_inputs()
    assert a.shape == (5, 6) and x.shape == (5, 1)  # both share the leading size 6: both resized


def test_a_contracted_square_operand_is_checked_with_the_first_input_resized_alone() -> None:
    """The reference rejects both inputs resized (``A @ x`` with M == K); the check falls back to A alone
    instead of calling the problem not applicable, and a kernel that keeps M fixed is caught."""
    src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, a, x):\n"
           "        return torch.matmul(a, x)\n\ndef get_inputs():\n    return [torch.randn(12, 12), torch.randn(12, 1)]"
           "\n\ndef get_init_inputs():\n    return []\n")
    problem = Problem.from_source(src, name="square_matvec")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0))
    assert cand.source is not None, cand.note
    result = evaluate(problem, cand.source, generalize=True, **RUN)
    assert result.ok and result.generalizes == "yes", result.generalize_note
    assert "6, 11 instead of 12 (the first input resized alone" in (result.generalize_note or "")
    fixed = cand.source.replace("lead = _lead(a0,", "lead = 12 or _lead(a0,")  # M baked back in
    assert fixed != cand.source
    result = evaluate(problem, fixed, generalize=True, **RUN)
    assert result.ok and result.generalizes == "no", result.generalize_note


def test_a_shape_generic_kernel_generalizes(softmax_reference: Path, softmax_candidate: str) -> None:
    result = evaluate(softmax_reference, softmax_candidate, generalize=True, **RUN)
    assert result.ok and result.generalizes == "yes", result.generalize_note
    assert "64, 127 instead of 129" in (result.generalize_note or "")
    assert "generalizes: yes" in result.feedback()


def test_a_shape_specialized_kernel_does_not(softmax_reference: Path) -> None:
    from tritonsmith.agents.builtin import _plan
    from tritonsmith.agents.builtin._emit import emit_module

    problem = load_problem(softmax_reference)
    # the built-in generator's static-shapes variant: every size fixed, the launchers check them
    traced, plan = _plan(problem, {"static_shapes": True}, None)
    specialized = emit_module(problem.name, problem.source, traced, plan, {}, "static-shapes")
    assert "kernels are shape-specialized" in specialized
    result = evaluate(problem, specialized, generalize=True, **RUN)
    assert result.ok and result.generalizes == "no"
    assert "leading size 64 (instead of 129)" in (result.generalize_note or "")


def test_a_reference_fixed_to_its_batch_is_not_applicable(softmax_candidate: str) -> None:
    src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.bias = nn.Parameter(torch.randn(129, 1000))\n\n"
           "    def forward(self, x):\n        return torch.softmax(x + self.bias, dim=1)\n\n"
           "def get_inputs():\n    return [torch.randn(129, 1000)]\n\ndef get_init_inputs():\n    return []\n")
    problem = Problem.from_source(src, name="fixed_batch")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert cand.source is not None
    result = evaluate(problem, cand.source, generalize=True, **RUN)
    assert result.ok and result.generalizes == "n/a"
    assert "does not accept leading sizes 64, 127" in (result.generalize_note or "")
