"""The built-in generator's depthwise convolution kernels (a window kernel with weighted taps): small odd
shapes, run for real on the Triton interpreter against the reference (atol = rtol = 1e-4, two trials of
fresh random inputs). Other convolutions (dense, grouped, transposed) are implicit GEMMs (test_builtin_convgemm.py)
or torch calls."""

from __future__ import annotations

from typing import Any

import pytest

from tritonsmith.agents.base import Candidate, GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator, summarize
from tritonsmith.core.problem import Problem

from _builtin_check import run_on_interpreter

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _problem(name: str, init: str, forward: str, inputs: str) -> Problem:
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}\n"
           f"    def forward(self, {forward}\n\ndef get_inputs():\n    return {inputs}\n\n"
           "def get_init_inputs():\n    return []\n")
    return Problem.from_source(src, name=name)


def _module(name: str, layer: str, shape: str, chain: str = "y", prologue: str = "x") -> Problem:
    """``chain`` (an expression of the layer's output ``y``) runs after ``self.layer(prologue)``."""
    return _problem(name, f"        self.layer = {layer}\n        self.scale = nn.Parameter(torch.randn(6, 1, 1))",
                    f"x):\n        y = self.layer({prologue})\n        return {chain}", f"[torch.randn({shape})]")


CASES: dict[str, Problem] = {
    "dw2d_3x3_s1_p1_bias": _module("dw2d_3x3_s1_p1_bias", "nn.Conv2d(5, 5, 3, 1, 1, groups=5, bias=True)",
                                   "2, 5, 11, 13"),
    "dw2d_s2_p0_d2_nobias": _module("dw2d_s2_p0_d2_nobias",
                                    "nn.Conv2d(5, 5, 3, stride=2, padding=0, dilation=2, groups=5, bias=False)",
                                    "2, 5, 13, 11"),
    "dw2d_3x5_mult2": _module("dw2d_3x5_mult2", "nn.Conv2d(3, 6, (3, 5), stride=(2, 1), padding=(1, 2), groups=3)",
                              "2, 3, 9, 12"),
    "dw1d": _module("dw1d", "nn.Conv1d(4, 4, 5, stride=2, padding=3, groups=4)", "3, 4, 29"),
    "dw3d": _module("dw3d", "nn.Conv3d(2, 4, 3, padding=1, dilation=(1, 2, 1), groups=2, bias=False)",
                    "1, 2, 5, 6, 7"),
    "dw_then_chain": _module("dw_then_chain", "nn.Conv2d(3, 6, 3, padding=1, groups=3)", "2, 3, 9, 10",
                             chain="torch.sigmoid(y) * self.scale - 0.25"),
    "dw_of_strided_view": _module("dw_of_strided_view", "nn.Conv2d(3, 3, (2, 3), padding=(1, 0), groups=3)",
                                  "2, 3, 9, 10", prologue="x.transpose(2, 3)"),
}


@pytest.fixture(scope="module")
def generated() -> dict[str, Candidate]:
    gen = BuiltinGenerator()
    return {name: gen.generate(GenerationRequest(problem=p, iteration=0)) for name, p in CASES.items()}


@pytest.fixture(scope="module")
def interpreted(generated: dict[str, Candidate], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """All candidates checked in one interpreter subprocess (startup dominates the cost)."""
    pairs = {name: (problem.source, generated[name].source) for name, problem in CASES.items()}
    return run_on_interpreter(tmp_path_factory.mktemp("builtin_dwconv"), pairs)


def _kernel(src: str, name: str) -> str:
    return src.split(f"def {name}(", 1)[1].split("\n\n\n", 1)[0]


@pytest.mark.parametrize("name", list(CASES))
def test_depthwise_conv_matches_reference_on_interpreter(name: str, generated: dict[str, Candidate],
                                                         interpreted: dict[str, Any]) -> None:
    cand = generated[name]
    assert cand.source is not None, cand.note
    assert "_window_0_kernel" in cand.source and "tl.fma(" in cand.source
    assert "hybrid" not in cand.note and "F.conv" not in cand.source
    result = interpreted[name]
    assert result["ok"], result["detail"]


def test_depthwise_kernel_shape(generated: dict[str, Candidate]) -> None:
    """Only real taps are unrolled; masks only along dims whose window reaches the padding; the channel
    multiplier maps output channel c to input channel c // mult; bias and chain are the epilogue."""
    src = _kernel(generated["dw2d_s2_p0_d2_nobias"].source or "", "_window_0_kernel")
    assert src.count("tl.static_range(3)") == 2 and "k0 * 2" in src and "k1 * 2" in src
    assert "(i0 >= 0)" not in src and "(i1 < 11)" not in src and "mask=mask," in src  # never in the padding
    src = _kernel(generated["dw2d_3x5_mult2"].source or "", "_window_0_kernel")
    assert "tl.static_range(3)" in src and "tl.static_range(5)" in src and "(c // 2)" in src
    assert "(i0 >= 0)" in src and "(i1 < 12)" in src
    src = _kernel(generated["dw1d"].source or "", "_window_0_kernel")
    assert src.count("tl.static_range(") == 1 and "tl.static_range(5)" in src
    chain = generated["dw_then_chain"].source or ""
    assert "_pointwise_0_kernel" not in chain  # bias, sigmoid, scale and shift run before the store
    body = _kernel(chain, "_window_0_kernel")
    assert "_sigmoid(" in body and "# self.scale[6, 1, 1]" in body and "self.layer.bias[6]" in body
    s = summarize(CASES["dw2d_3x3_s1_p1_bias"])
    assert s.emittable and s.kernels == ("window",) and not s.torch_ops


def test_depthwise_variants_change_the_launch() -> None:
    from tritonsmith.agents.base import Attempt

    gen = BuiltinGenerator()
    problem = CASES["dw1d"]
    first = gen.generate(GenerationRequest(problem=problem, iteration=0))
    tried = Attempt(iteration=0, source=first.source, result=None, feedback="", reward=0.0, generator="builtin",
                    variant=first.variant)
    second = gen.generate(GenerationRequest(problem=problem, iteration=1, history=[tried]))
    assert second.variant == "window-256" and second.source is not None and "BLOCK=256" in second.source


@pytest.mark.parametrize(("name", "layer", "shape"), [
    ("dense_conv", "nn.Conv2d(3, 5, 3)", "2, 3, 11, 13"),
    ("grouped_conv", "nn.Conv2d(4, 6, 3, groups=2)", "2, 4, 11, 13"),
    ("single_channel_conv", "nn.Conv2d(1, 3, 3)", "2, 1, 11, 13"),
    ("transposed_depthwise", "nn.ConvTranspose2d(3, 3, 3, groups=3)", "2, 3, 11, 13"),
])
def test_other_convolutions_are_implicit_gemms_or_torch_calls(name: str, layer: str, shape: str) -> None:
    """Not depthwise windows. Pure: an implicit-GEMM Triton kernel (``_convgemm``, tested in
    test_builtin_convgemm.py). With a chain after it, first: the conv is a torch call and the chain a Triton
    kernel."""
    pure = _problem(name, f"        self.layer = {layer}", "x):\n        return self.layer(x)",
                    f"[torch.randn({shape})]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=pure, iteration=0))
    assert cand.source is not None and "_conv_0_kernel" in cand.source and "tl.fma(" not in cand.source
    assert summarize(pure).kernels == ("conv",)
    chained = _problem(name, f"        self.layer = {layer}", "x):\n        return torch.relu(self.layer(x))",
                       f"[torch.randn({shape})]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=chained, iteration=0))
    assert cand.source is not None and "hybrid" in cand.note and "tl.fma(" not in cand.source
    assert "F.conv" in cand.source and "_pointwise_0_kernel" in cand.source
