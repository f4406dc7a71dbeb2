"""Shape-generic kernels: every family takes the leading (batch) size at run time.

Each case is generated once at its reference's leading size, then run for real on the Triton interpreter
against the reference at that size, at half of it and at an odd size (the evaluator's ``generalize``
sizes, inputs resized as it resizes them): atol = rtol = 1e-4, two trials of fresh random inputs each.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

from tritonsmith.agents.base import Attempt, Candidate, GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem
from tritonsmith.evaluator._generalize import leading_sizes, resized_problem

from _builtin_check import run_on_interpreter

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _problem(name: str, init: str, forward: str, inputs: str, init_args: str = "[]") -> Problem:
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           f"{init or '        pass'}\n\n    def forward(self, {forward}\n\n\ndef get_inputs():\n    return {inputs}\n\n\n"
           f"def get_init_inputs():\n    return {init_args}\n")
    return Problem.from_source(src, name=name)


# family -> (problem, the kernel kind the case must contain); leading sizes 6 (half 3, odd 5) or 7 (3, 5)
CASES: dict[str, tuple[Problem, str]] = {
    "pointwise": (_problem("pointwise", "        self.b = nn.Parameter(torch.randn(1, 9, 1))",
                           "x):\n        return torch.sigmoid(x * 2.0 + self.b) - 0.5", "[torch.randn(6, 9, 7)]"),
                  "_pointwise_0_kernel"),
    "softmax_rows": (_problem("softmax_rows", "", "x):\n        return torch.softmax(x, dim=-1)",
                              "[torch.randn(7, 37)]"), "_row_0_kernel"),
    "layernorm_flat_view": (_problem("layernorm_flat_view", "        self.ln = nn.LayerNorm((5, 11))",
                                     "x):\n        return self.ln(x).flatten(1) * 2.0", "[torch.randn(6, 5, 11)]"),
                            "_row_0_kernel"),
    "sum_middle_dim": (_problem("sum_middle_dim", "", "x):\n        return torch.sum(x, dim=1) + 1.0",
                                "[torch.randn(6, 13, 5)]"), "_row_0_kernel"),
    "maxpool2d": (_problem("maxpool2d", "        self.pool = nn.MaxPool2d(3, stride=2, padding=1)",
                           "x):\n        return torch.relu(self.pool(x))", "[torch.randn(6, 3, 11, 9)]"),
                  "_window_0_kernel"),
    "depthwise_conv": (_problem("depthwise_conv", "        self.conv = nn.Conv2d(4, 4, 3, padding=1, groups=4)",
                                "x):\n        return self.conv(x)", "[torch.randn(6, 4, 9, 10)]"),
                       "_window_0_kernel"),
    "cumsum_rows": (_problem("cumsum_rows", "", "x):\n        return torch.cumsum(x, dim=1)",
                             "[torch.randn(7, 41)]"), "_scan_0_kernel"),
    "linear_gelu": (_problem("linear_gelu", "        self.fc = nn.Linear(19, 23)",
                             "x):\n        return F.gelu(self.fc(x))", "[torch.randn(6, 19)]"), "_matmul_0_kernel"),
    "linear_3d": (_problem("linear_3d", "        self.fc = nn.Linear(12, 7)",
                           "x):\n        return torch.relu(self.fc(x))", "[torch.randn(6, 5, 12)]"),
                  "_matmul_0_kernel"),
    "bmm": (_problem("bmm", "", "a, b):\n        return torch.bmm(a, b) * 0.5",
                     "[torch.randn(7, 9, 11), torch.randn(7, 11, 13)]"), "_matmul_0_kernel"),
    "conv_epilogue": (_problem("conv_epilogue", "        self.conv = nn.Conv2d(3, 5, 3)",
                               "x):\n        return torch.tanh(self.conv(x)) * 2.0", "[torch.randn(6, 3, 9, 8)]"),
                      "_pointwise_0_kernel"),
    "conv_groupnorm": (_problem("conv_groupnorm", "        self.conv = nn.Conv2d(3, 6, 3)\n"
                                "        self.gn = nn.GroupNorm(2, 6)",
                                "x):\n        return self.gn(self.conv(x))", "[torch.randn(6, 3, 8, 9)]"),
                       "_row_0_kernel"),
    # InstanceNorm runs as BatchNorm over a [1, N * C, ...] view: the add before the view reads the input and
    # a per-channel parameter in their own shapes, the rows follow the leading size in dimension 1
    "instancenorm_view": (_problem("instancenorm_view", "        self.b = nn.Parameter(torch.randn(4, 1, 1))\n"
                                  "        self.norm = nn.InstanceNorm2d(4)",
                                  "x):\n        return self.norm(x + self.b) * 2.0", "[torch.randn(6, 4, 5, 7)]"),
                          "_row_0_kernel"),
    # attention with batch_first: q, k, v are views of [L, B, 3E] whose strides hold the batch, and the scores'
    # batched matmul reads v as [B * H, L, d] through a stride of B * d
    "attention_layer": (_problem("attention_layer", "        self.layer = nn.TransformerEncoderLayer(16, 2, 32, "
                                 "dropout=0.0, batch_first=True)",
                                 "x):\n        return self.layer(x)", "[torch.randn(6, 3, 16)]"), "_matmul_"),
    # a transposed batch: the output [5, N] holds it in dimension 1, read through x.t()'s strides (1, 5)
    "transposed_batch": (_problem("transposed_batch", "", "x):\n        return x.t() * 2.0", "[torch.randn(6, 5)]"),
                         "_pointwise_0_kernel"),
    "batchnorm_train": (_problem("batchnorm_train", "        self.bn = nn.BatchNorm2d(5)",
                                 "x):\n        return self.bn(x)", "[torch.randn(6, 5, 7, 9)]"), "_row_0_kernel"),
    "cross_entropy": (_problem("cross_entropy", "", "x, y):\n        return F.cross_entropy(x, y)",
                               "[torch.randn(7, 11), torch.randint(0, 11, (7,))]"), "_row_"),
    "implicit_gemm_conv": (_problem("implicit_gemm_conv", "        self.conv = nn.Conv2d(3, 5, 3, stride=2, padding=1)",
                                    "x):\n        return self.conv(x)", "[torch.randn(6, 3, 9, 8)]"), "_conv_0_kernel"),
    "transposed_conv": (_problem("transposed_conv", "        self.conv = nn.ConvTranspose1d(4, 6, 3, stride=2, groups=2)",
                                 "x):\n        return self.conv(x)", "[torch.randn(7, 4, 9)]"),
                        "_conv_0_kernel"),
    "cat_features": (_problem("cat_features", "", "x, y):\n        return torch.cat([x * 2.0, y], dim=1)",
                              "[torch.randn(6, 5), torch.randn(6, 3)]"), "_pointwise_"),
}


@pytest.fixture(scope="module")
def generated() -> dict[str, Candidate]:
    gen = BuiltinGenerator()
    return {name: gen.generate(GenerationRequest(problem=p, iteration=0)) for name, (p, _) in CASES.items()}


def _sizes(problem: Problem) -> tuple[int, ...]:
    lead = 6 if "randn(6" in problem.source else 7
    return (lead, *leading_sizes(lead))


@pytest.fixture(scope="module")
def interpreted(generated: dict[str, Candidate], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every candidate at every leading size, in one interpreter subprocess (its start-up dominates)."""
    pairs: dict[str, tuple[str, str | None]] = {}
    for name, (problem, _) in CASES.items():
        for size in _sizes(problem):
            pairs[f"{name}_at_{size}"] = (resized_problem(problem, size).source, generated[name].source)
    return run_on_interpreter(tmp_path_factory.mktemp("builtin_shapes"), pairs)


@pytest.mark.parametrize("name", list(CASES))
def test_shape_generic_kernels_match_the_reference_at_other_leading_sizes(
        name: str, generated: dict[str, Candidate], interpreted: dict[str, Any]) -> None:
    cand = generated[name]
    assert cand.source is not None, cand.note
    assert "shape-generic" in cand.note, cand.note
    assert CASES[name][1] in cand.source and "lead = _lead(" in cand.source
    sizes = _sizes(CASES[name][0])
    assert len(set(sizes)) == 3 and any(s % 2 for s in sizes[1:])
    for size in sizes:
        result = interpreted[f"{name}_at_{size}"]
        assert result["ok"], f"leading size {size}: {result['detail']}"


def test_split_batch_statistics_follow_the_leading_size(tmp_path: Path) -> None:
    """Batch statistics cut into chunks (the split row kernels): the chunk length is computed per call,
    and a short batch leaves the last chunks empty."""
    from tritonsmith.agents.builtin import _plan
    from tritonsmith.agents.builtin._emit import emit_module

    problem = CASES["batchnorm_train"][0]
    traced, plan = _plan(problem, {}, None)
    source = emit_module(problem.name, problem.source, traced, plan, {"row": {"split": 5, "BLOCK_R": 16}}, "split")
    assert plan.lead is not None and "_row_0_stats0_kernel" in source and "CHUNK = triton.cdiv(" in source
    pairs = {f"split_at_{size}": (resized_problem(problem, size).source, source) for size in (6, 3, 5, 1)}
    results = run_on_interpreter(tmp_path, pairs)
    for name, result in results.items():
        assert result["ok"], f"{name}: {result['detail']}"


def _model(source: str, path: Path) -> Any:
    """The candidate's ModelNew, imported from a file (Triton reads a kernel's source from its file)."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    return module.ModelNew()


def test_a_changed_inner_size_is_refused_naming_expected_and_got(generated: dict[str, Candidate],
                                                                  tmp_path: Path) -> None:
    """Only the leading size may change: the launcher says which size it expected and which it got
    (before any kernel runs)."""
    model = _model(generated["pointwise"].source or "", tmp_path / "shapes_pointwise.py")
    with pytest.raises(ValueError, match=r"expected shape \(4, 9, 7\), got \(4, 9, 8\)"):
        model(torch.randn(4, 9, 8))
    model = _model(generated["linear_3d"].source or "", tmp_path / "shapes_linear_3d.py")
    with pytest.raises(ValueError, match=r"expected shape \(3, 5, 12\), got \(3, 5, 11\)"):
        model(torch.randn(3, 5, 11))


def test_static_shapes_variant_comes_last_and_specialises_every_size() -> None:
    problem = CASES["softmax_rows"][0]
    gen = BuiltinGenerator()
    history: list[Attempt] = []
    while True:
        cand = gen.generate(GenerationRequest(problem=problem, iteration=len(history), history=history))
        if cand.source is None:
            break
        history.append(Attempt(iteration=len(history), source=cand.source, result=None, feedback="", reward=0.0,
                               generator="builtin", variant=cand.variant))
    keys = [a.variant for a in history]
    assert keys[-1] == "static-shapes" and keys.count("static-shapes") == 1 and len(keys) > 2
    static = history[-1].source or ""
    assert "kernels are shape-specialized" in static and "_lead(" not in static
    assert "kmask = k < 7" in static and "lead" not in static.split("def _row_0_kernel(")[1].split(":")[0]
    generic = history[0].source or ""
    assert "kmask = k < lead" in generic and "_row_0_kernel(in0_ptr, out0_ptr, lead, " in generic


@pytest.mark.parametrize(("name", "forward", "inputs", "why"), [
    ("scan_of_transposed_batch", "x):\n        return torch.cumsum(x.t(), dim=0)", "[torch.randn(6, 5)]",
     "dimension 1 follows the leading"),
    ("unbiased_var_over_batch", "x):\n        return torch.var(x, dim=0)", "[torch.randn(6, 5)]",
     "not in proportion"),
    ("baked_batch", "x):\n        return x.view(6, -1) * 2.0", "[torch.randn(6, 5, 3)]", "does not accept"),
    ("cumsum_over_batch", "x):\n        return torch.cumsum(x, dim=0)", "[torch.randn(6, 5)]", "scans along"),
    ("leading_size_one", "x):\n        return torch.relu(x)", "[torch.randn(1, 5)]", "leading size is 1"),
])
def test_kernels_stay_specialised_where_the_leading_size_cannot_change(name: str, forward: str, inputs: str,
                                                                        why: str) -> None:
    """A scan over a transposed batch (only views, matmuls, split-K's sum and elementwise ops index a moved
    leading size), an unbiased variance
    or a scan over the batch, a reference that bakes its batch size in, a leading size of 1:
    the kernels keep every size fixed, the note says why, and no static-shapes variant repeats them."""
    problem = _problem(name, "", forward, inputs)
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0))
    assert cand.source is not None, cand.note
    assert "shape-specialised" in cand.note and why in cand.note, cand.note
    assert "kernels are shape-specialized" in cand.source and "_lead(" not in cand.source


def test_a_square_operand_whose_first_dimension_is_contracted_leaves_the_first_input_generic() -> None:
    """``A @ x`` with M == K (the scaled-down 4_Matrix_vector_multiplication): resizing every input whose first
    dimension is the leading size breaks the contraction, so the reference rejects it; resizing A alone (the
    evaluator's fallback) shows M follows the batch, and the kernel takes it at run time."""
    problem = _problem("square_matvec", "", "a, x):\n        return torch.matmul(a, x)",
                       "[torch.randn(48, 48), torch.randn(48, 1)]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0))
    assert cand.source is not None, cand.note
    assert "shape-specialised" not in cand.note and "_lead(a0" in cand.source, cand.note
    assert "_expect(a1, (48, 1)" in cand.source  # the vector keeps its size


def test_an_elementwise_op_whose_output_holds_the_batch_in_a_later_dimension_stays_generic(tmp_path: Path) -> None:
    """75_Gemm_GroupNorm_Min_BiasAdd's tail: ``x.min(1, keepdim=True) + bias[1, C, 1, 1]`` broadcasts the batch
    into dimension 2 of the output ``[1, C, N, 1]``; the kernel indexes with the run-time size there and stays
    correct at other leading sizes (it was shape-specialised: only matmuls indexed a moved leading size)."""
    problem = _problem("moved_batch", "        self.bias = nn.Parameter(torch.randn(1, 5, 1, 1))",
                       "x):\n        return torch.min(x, dim=1, keepdim=True)[0] + self.bias", "[torch.randn(6, 9)]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0))
    assert cand.source is not None, cand.note
    assert "shape-specialised" not in cand.note and "% lead" in cand.source, cand.note
    from tritonsmith.evaluator._evaluate import evaluate

    result = evaluate(problem, cand.source, device="cpu", trials=1, generalize=True, timeout_s=300)
    assert result.ok and result.generalizes == "yes", (result.message, result.generalize_note)


def test_an_lstm_with_random_initial_states_of_the_batch_size_stays_generic() -> None:
    """35_LSTM: ``h0 = torch.randn(layers, batch, hidden)`` holds the batch in dimension 1, so its strides
    change with it; the forward draws it at the run-time size (``x.shape[0]``) and the linear layer after the
    torch LSTM stays shape-generic, correct at other leading sizes (it was shape-specialised). The draws differ
    between reference and candidate (the evaluator does not reseed between them); 64 steps, as 35's 512, make
    the output forget the initial state, so only a wrong shape or layout fails here."""
    problem = _problem("lstm_random_state", "        self.lstm = nn.LSTM(5, 8, 2, batch_first=True)\n"
                       "        self.fc = nn.Linear(8, 3)",
                       "x):\n        h0 = torch.randn(2, x.size(0), 8, device=x.device)\n"
                       "        c0 = torch.randn(2, x.size(0), 8, device=x.device)\n"
                       "        out, _ = self.lstm(x, (h0, c0))\n        return self.fc(out[:, -1, :])",
                       "[torch.randn(6, 64, 5)]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0))
    assert cand.source is not None, cand.note
    assert "shape-generic" in cand.note, cand.note
    assert "torch.randn((2, x.shape[0], 8)" in cand.source
    from tritonsmith.evaluator._evaluate import evaluate

    result = evaluate(problem, cand.source, device="cpu", trials=1, generalize=True, timeout_s=300)
    assert result.ok and result.generalizes == "yes", (result.message, result.generalize_note)


def test_a_two_stage_whole_tensor_mean_takes_the_batch_in_its_rows_and_its_count() -> None:
    """100_HingeLoss at full size: a mean over 2^18+ elements runs as 1024 rows as long as the batch, then a
    sum of the 1024 partials divided by a count that follows the batch. The first kernel loops its rows to the
    run-time length; the second reads no batch-sized value, so its launcher takes the predictions only to read
    the batch size (it was shape-specialised)."""
    problem = _problem("two_stage_mean", "",
                       "predictions, targets):\n        return torch.mean(torch.clamp(1 - predictions * targets, min=0))",
                       "[torch.randn(256, 1024), torch.randn(1024)]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0))
    assert cand.source is not None, cand.note
    assert "shape-generic" in cand.note, cand.note
    assert "for r0 in range(0, lead, BLOCK_R)" in cand.source and "def _row_1(a0: torch.Tensor, a1: torch.Tensor)" in cand.source
    from tritonsmith.evaluator._evaluate import evaluate

    result = evaluate(problem, cand.source, device="cpu", trials=1, generalize=True, timeout_s=300)
    assert result.ok and result.generalizes == "yes", (result.message, result.generalize_note)
