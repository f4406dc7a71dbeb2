"""Shape-generic matmuls whose leading size is not the product's first dimension, on the interpreter.

KernelBench's GEMM problems move the leading size off the first dimension of some value: split-K views
``A[M, K]`` as ``[S, M, K / S]`` and sums partial products ``[S, M, N]``; an einsum flattens ``[b, i, j, l]``
into ``[1, b * i * j, l]``; ``A.T @ B`` with ``A[K, M]`` and ``B[K, N]`` contracts over it; zero-padded and
tf32 hi/lo staging copy A with as many rows as the call has. Each case is generated once at its
reference's leading size, then run against the reference at that size, at half of it and at an odd size
(the evaluator's ``generalize`` sizes, inputs resized as it resizes them, fresh random inputs per trial).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator, _plan
from tritonsmith.agents.builtin._emit import emit_module
from tritonsmith.core.problem import Problem
from tritonsmith.evaluator._generalize import leading_sizes, resized_problem

from _builtin_check import run_on_interpreter

_HEAD = "import torch\nimport torch.nn as nn\n\n"


def _problem(name: str, forward: str, inputs: str) -> Problem:
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
           f"    def forward(self, a, b):\n        return {forward}\n\n\n"
           f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n")
    return Problem.from_source(src, name=name)


# case -> (problem, graph options, launch overrides per group kind, a line the kernel must contain)
CASES: dict[str, tuple[Problem, dict[str, Any], dict[str, dict[str, Any]], str]] = {
    # 6_Matmul_with_large_K: M (the leading size) is the second dimension of the chunks and partial products
    "split_k": (_problem("split_k", "torch.matmul(a, b)", "[torch.randn(6, 96), torch.randn(96, 5)]"),
                {"split_k": 4}, {}, "M, N, K = lead, 5, 24"),
    "split_k_aligned": (_problem("split_k_aligned", "torch.matmul(a, b)", "[torch.randn(6, 96), torch.randn(96, 5)]"),
                        {"split_k": 4}, {"matmul": {"pad": True, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}},
                        "_pad_copy_rows_kernel[("),
    # 8_Matmul_with_irregular_shapes: the staged A has as many (padded) rows as the call
    "aligned": (_problem("aligned", "torch.matmul(a, b)", "[torch.randn(7, 13), torch.randn(13, 9)]"),
                {}, {"matmul": {"pad": True, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}},
                "wa = torch.empty((1, triton.cdiv(lead, 16) * 16, 16)"),
    "tf32_split": (_problem("tf32_split", "torch.matmul(a, b)", "[torch.randn(7, 13), torch.randn(13, 9)]"),
                   {}, {"matmul": {"precision": "3xtf32", "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}},
                   "_tf32_split_rows_kernel[("),
    # 11_4D_tensor_matrix_multiplication: M = b * i * j of a [1, M, l] view
    "einsum_4d": (_problem("einsum_4d", 'torch.einsum("bijl,lk->bijk", a, b)',
                           "[torch.randn(6, 3, 5, 7), torch.randn(7, 9)]"), {}, {}, "M, N, K = lead * 15, 9, 7"),
    # 16_Matmul_with_transposed_A: both inputs lead with K, the contracted size: a run-time K loop bound
    "transposed_a": (_problem("transposed_a", "torch.matmul(a.T, b)", "[torch.randn(7, 5), torch.randn(7, 6)]"),
                     {}, {}, "M, N, K = 5, 6, lead"),
    "gram": (_problem("gram", "a.t() @ a + b", "[torch.randn(6, 5), torch.randn(5, 5)]"), {}, {},
             "M, N, K = 5, 5, lead"),
}


def _sizes(problem: Problem) -> tuple[int, ...]:
    lead = 6 if "randn(6" in problem.source else 7
    return (lead, *leading_sizes(lead))


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    out = {}
    for name, (problem, options, cfgs, _) in CASES.items():
        traced, plan = _plan(problem, options, None)
        out[name] = emit_module(problem.name, problem.source, traced, plan, cfgs, name)
        assert plan.lead is not None, f"{name}: {plan.static_reason}"
    return out


@pytest.fixture(scope="module")
def interpreted(sources: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case at every leading size, in one interpreter subprocess (its start-up dominates)."""
    pairs = {f"{name}_at_{size}": (resized_problem(problem, size).source, sources[name])
             for name, (problem, *_) in CASES.items() for size in _sizes(problem)}
    return run_on_interpreter(tmp_path_factory.mktemp("gemm_shapes"), pairs)


@pytest.mark.parametrize("name", list(CASES))
def test_matmuls_take_a_moved_leading_size_at_run_time(name: str, sources: dict[str, str],
                                                       interpreted: dict[str, Any]) -> None:
    source = sources[name]
    assert "lead = _lead(" in source and CASES[name][3] in source, source
    assert "Kernels take the leading (batch) dimension at run time" in source
    sizes = _sizes(CASES[name][0])
    assert len(set(sizes)) == 3 and any(s % 2 for s in sizes[1:])
    for size in sizes:
        result = interpreted[f"{name}_at_{size}"]
        assert result["ok"], f"leading size {size}: {result['detail']}"


def test_the_first_candidates_of_the_four_problems_are_shape_generic() -> None:
    """What the generator offers first (no variant forced) for the shapes of 8, 11 and 16."""
    for name in ("aligned", "einsum_4d", "transposed_a"):
        cand = BuiltinGenerator().generate(GenerationRequest(problem=CASES[name][0], iteration=0))
        assert cand.source is not None and "shape-generic" in cand.note, cand.note


def test_a_staged_run_time_k_stays_specialised_and_the_header_says_why(tmp_path: Path) -> None:
    """Zero-padded operands are staged with K fixed: where K follows the leading size, the module is written
    for the reference's shapes, and its header names the reason."""
    problem = CASES["transposed_a"][0]
    traced, plan = _plan(problem, {}, None)
    source = emit_module(problem.name, problem.source, traced, plan, {"matmul": {"pad": True}}, "mm-aligned")
    assert plan.lead is None and "_lead(" not in source
    header = " ".join(source.split('"""')[1].split())  # the reason is wrapped over lines
    assert "cannot change at run time here (the staging kernels of zero-padded or tf32 hi/lo operands take K " \
           "as a compile-time size)" in header, header
    results = run_on_interpreter(tmp_path, {"static": (problem.source, source)})
    assert results["static"]["ok"], results["static"]["detail"]
