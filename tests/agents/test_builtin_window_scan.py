"""The built-in generator's pooling ("window") and scan kernels: small odd shapes, run for real on the
Triton interpreter against the reference (atol = rtol = 1e-4, two trials of fresh random inputs)."""

from __future__ import annotations

import re
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


def _module(name: str, layer: str, shape: str, chain: str = "y") -> Problem:
    """``chain`` (an expression of the layer's output ``y``) runs after ``self.layer(x)``."""
    return _problem(name, f"        self.layer = {layer}",
                    f"x):\n        y = self.layer(x)\n        return {chain}", f"[torch.randn({shape})]")


CASES: dict[str, tuple[Problem, set[str]]] = {
    # name: (problem, kernel kinds expected); every case is checked on the interpreter
    "max_pool1d_pad_dilation": (_module("max_pool1d_pad_dilation",
                                        "nn.MaxPool1d(4, stride=1, padding=2, dilation=3)", "2, 3, 29"), {"window"}),
    "max_pool2d_k3_s2_p1": (_module("max_pool2d_k3_s2_p1", "nn.MaxPool2d(3, 2, 1)", "2, 3, 11, 13"), {"window"}),
    "avg_pool2d_pad_include": (_module("avg_pool2d_pad_include", "nn.AvgPool2d(3, 2, 1, count_include_pad=True)",
                                       "2, 3, 11, 13"), {"window"}),
    "avg_pool2d_pad_exclude": (_module("avg_pool2d_pad_exclude", "nn.AvgPool2d(3, 2, 1, count_include_pad=False)",
                                       "2, 3, 11, 13"), {"window"}),
    "avg_pool2d_ceil_divisor": (_problem(
        "avg_pool2d_ceil_divisor", "        pass",
        "x):\n        a = F.avg_pool2d(x, (2, 3), 2, (0, 1), ceil_mode=True, count_include_pad=True)\n"
        "        b = F.avg_pool2d(x, (2, 3), 2, (0, 1), ceil_mode=True, count_include_pad=False)\n"
        "        return a * b + F.avg_pool2d(x, 3, 2, 1, divisor_override=4)",
        "[torch.randn(2, 3, 11, 13)]"), {"window"}),
    "avg_pool3d": (_module("avg_pool3d", "nn.AvgPool3d(3, stride=2, padding=1)", "2, 3, 5, 7, 9"), {"window"}),
    "max_pool3d": (_module("max_pool3d", "nn.MaxPool3d((2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0), "
                                         "dilation=(1, 2, 1))", "2, 3, 5, 7, 9"), {"window"}),
    "pool_then_chain": (_problem(
        "pool_then_chain", "        self.scale = nn.Parameter(torch.randn(3, 1, 1))",
        "x, z):\n        return (torch.sigmoid(F.max_pool2d(x, 2)) * self.scale + 0.5,\n"
        "                torch.relu(F.avg_pool1d(z, 3, 2, 1)) - 1.0)",
        "[torch.randn(2, 3, 11, 13), torch.randn(2, 3, 17)]"), {"window"}),
    "pool_of_strided_views": (_problem(  # the window reads through the view's strides; relu - 0.5 is a prologue
        "pool_of_strided_views", "        pass",
        "x, z):\n        return (F.avg_pool2d(x.transpose(2, 3), 2, 1, 1, count_include_pad=False),\n"
        "                F.max_pool1d(torch.relu(z) - 0.5, 3, 2))",
        "[torch.randn(2, 3, 11, 13), torch.randn(2, 3, 17)]"), {"window"}),
    # prologues: the chain is computed per tap. -(x*x) - 1 peaks at the padding's 0 (-1), so computing the chain
    # on padded taps (instead of pooling -inf / 0 there) changes every border output
    "prologue_padded_max_avg": (_problem(
        "prologue_padded_max_avg", "        pass",
        "x, z):\n        return (F.max_pool2d(-(x * x) - 1.0, 3, 2, 1),\n"
        "                F.avg_pool2d(-(z * z) - 1.0, 3, 2, 1, count_include_pad=True))",
        "[torch.randn(2, 3, 11, 13), torch.randn(2, 3, 11, 13)]"), {"window"}),
    "prologue_two_inputs_per_channel": (_problem(
        "prologue_two_inputs_per_channel", "        self.scale = nn.Parameter(torch.randn(3, 1, 1))",
        "x, y):\n        return torch.tanh(F.avg_pool2d(torch.relu(x + y) * self.scale - 0.25, 2))",
        "[torch.randn(2, 3, 11, 13), torch.randn(2, 3, 11, 13)]"), {"window"}),
    "prologue_overlapping_3d": (_problem(
        "prologue_overlapping_3d", "        self.bias = nn.Parameter(torch.randn(3, 1, 1, 1))",
        "x):\n        return F.max_pool3d(torch.sigmoid(x + self.bias) * 2.0, (2, 3, 2), stride=(1, 2, 2), "
        "dilation=(1, 2, 1))",
        "[torch.randn(2, 3, 5, 7, 9)]"), {"window"}),
    "prologue_value_read_twice": (_problem(  # the chain's value is also summed: it is stored, not a prologue
        "prologue_value_read_twice", "        pass",
        "x):\n        y = torch.relu(x) - 0.5\n        return F.max_pool2d(y, 2), y * 3.0",
        "[torch.randn(2, 3, 11, 13)]"), {"window", "pointwise"}),
    "cumsum_dims": (_problem(
        "cumsum_dims", "        pass",
        "x, y, z):\n        return torch.cumsum(x, dim=0), torch.cumsum(y, dim=1), torch.cumsum(z, dim=-1)",
        "[torch.randn(600, 7), torch.randn(3, 700, 5), torch.randn(3, 2500)]"), {"scan"}),
    "cumprod_dims": (_problem(
        "cumprod_dims", "        pass",
        "x, y, z):\n        return torch.cumprod(x, dim=0), torch.cumprod(y, dim=1), torch.cumprod(z, dim=-1)",
        "[1 + 0.01 * torch.randn(600, 7), 1 + 0.01 * torch.randn(3, 700, 5), 1 + 0.01 * torch.randn(3, 2500)]"),
                     {"scan"}),
    "masked_cumsum_chain": (_problem(
        "masked_cumsum_chain", "        pass",
        "x, m):\n        return torch.tanh(torch.cumsum(x * (m > 0), dim=1) * 0.1) + 1.0",
        "[torch.randn(5, 2100), torch.randn(5, 2100)]"), {"scan"}),
    "cumsum_of_views": (_problem(
        "cumsum_of_views", "        pass",
        "x, v):\n        return torch.cumsum(x.permute(2, 0, 1), 1), torch.cumsum(v, 0) / 10",
        "[torch.randn(3, 300, 5), torch.randn(5000)]"), {"scan"}),
    "cumsum_of_slice": (_problem(
        "cumsum_of_slice", "        pass", "x):\n        return torch.cumsum(x[:, 1:], dim=1)",
        "[torch.randn(5, 9)]"), {"scan"}),
}


@pytest.fixture(scope="module")
def generated() -> dict[str, Candidate]:
    gen = BuiltinGenerator()
    return {name: gen.generate(GenerationRequest(problem=p, iteration=0)) for name, (p, _) in CASES.items()}


@pytest.fixture(scope="module")
def interpreted(generated: dict[str, Candidate], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """All candidates checked in one interpreter subprocess (startup dominates the cost)."""
    pairs = {name: (problem.source, generated[name].source) for name, (problem, _) in CASES.items()}
    return run_on_interpreter(tmp_path_factory.mktemp("builtin_window_scan"), pairs)


@pytest.mark.parametrize("name", list(CASES))
def test_window_and_scan_match_reference_on_interpreter(name: str, generated: dict[str, Candidate],
                                                        interpreted: dict[str, Any]) -> None:
    cand = generated[name]
    assert cand.source is not None, cand.note
    for kind in CASES[name][1]:
        assert f"_{kind}_0_kernel" in cand.source, f"expected a {kind} kernel"
    assert "hybrid" not in cand.note and "F.max_pool" not in cand.source and "F.avg_pool" not in cand.source
    assert "torch.cum" not in cand.source.split("class ModelNew", 1)[1]
    result = interpreted[name]
    assert result["ok"], result["detail"]


def _kernel(src: str, name: str) -> str:
    return src.split(f"def {name}(", 1)[1].split("\n\n\n", 1)[0]


def test_window_kernel_shape(generated: dict[str, Candidate]) -> None:
    """1-D pooling arrives as 2-D over a unit height: only the real window is unrolled; masks only where
    padding can be reached; the divisor follows count_include_pad."""
    src1 = _kernel(generated["max_pool1d_pad_dilation"].source or "", "_window_0_kernel")
    assert src1.count("tl.static_range(") == 1 and "tl.static_range(4)" in src1 and "k0 * 3" in src1
    assert "other=-float('inf')" in src1 and "(i0 >= 0)" in src1 and "(i0 < 29)" in src1
    inc = _kernel(generated["avg_pool2d_pad_include"].source or "", "_window_0_kernel")
    assert "acc / 9.0" in inc  # padding counted: always the full 3x3 window
    exc = _kernel(generated["avg_pool2d_pad_exclude"].source or "", "_window_0_kernel")
    assert "tl.maximum(start0, 0)" in exc and "tl.minimum(start1 + 3, 13)" in exc
    chain = generated["pool_then_chain"].source or ""
    assert "_pointwise_0_kernel" not in chain  # the elementwise chain is the window kernels' epilogue
    assert "_sigmoid(" in _kernel(chain, "_window_0_kernel") and "# self.scale[3, 1, 1]" in _kernel(chain,
                                                                                                  "_window_0_kernel")
    assert "tl.maximum(v" in _kernel(chain, "_window_1_kernel")  # relu after the average pooling


def test_window_prologue_is_computed_per_tap(generated: dict[str, Candidate]) -> None:
    """The elementwise chain before a pooling window runs inside the window kernel, at every tap, reading the
    chain's own inputs (no stored intermediate); padded taps pool -inf / 0, never the chain's value there."""
    for name in ("prologue_padded_max_avg", "prologue_two_inputs_per_channel", "prologue_overlapping_3d",
                 "pool_of_strided_views"):
        src = generated[name].source or ""
        assert "_pointwise_" not in src, name
    padded = generated["prologue_padded_max_avg"].source or ""
    for k in ("_window_0_kernel", "_window_1_kernel"):
        body = _kernel(padded, k)
        assert "prologue" in body and re.search(r"t_ = tl\.where\(m\d, v\d+\.to\(tl\.float32\), ", body), body
    two = _kernel(generated["prologue_two_inputs_per_channel"].source or "", "_window_0_kernel")
    assert two.count("tl.load(") == 3 and "t_ = v" in two  # x, y and the scale; no padding to mask
    # the per-channel scale is the same across a window: loaded once per output, before the window's loops
    assert two.split("tl.static_range(")[0].count("tl.load(") == 1 and "# self.scale[3, 1, 1]" in two
    over = _kernel(generated["prologue_overlapping_3d"].source or "", "_window_0_kernel")
    assert "# self.bias[3, 1, 1, 1]" in over.split("tl.static_range(")[0]
    kept = generated["prologue_value_read_twice"].source or ""
    assert "prologue" not in _kernel(kept, "_window_0_kernel")


def test_scan_rows_span_several_blocks(generated: dict[str, Candidate]) -> None:
    """Each scan of the dims cases walks its rows in more than one block (the carry is exercised)."""
    for name in ("cumsum_dims", "cumprod_dims"):
        src = generated[name].source or ""
        launches = re.findall(r"for r0 in range\(0, (\d+), BLOCK_R\)", src)
        blocks = [int(b) for b in re.findall(r"_scan_\d+_kernel\[.*BLOCK_R=(\d+)", src)]
        assert len(launches) == len(blocks) == 3
        assert all(int(r) > b for r, b in zip(launches, blocks, strict=True)), (launches, blocks)
    masked = generated["masked_cumsum_chain"].source or ""
    assert "_pointwise_0_kernel" not in masked  # the mask (prologue) and tanh (epilogue) run in the scan loop


def test_summary_kinds_and_variants() -> None:
    from tritonsmith.agents.builtin import _plan
    from tritonsmith.agents.builtin._variants import variant_menu

    s = summarize(CASES["max_pool2d_k3_s2_p1"][0])
    assert s.emittable and s.kernels == ("window",) and not s.torch_ops
    s = summarize(CASES["cumsum_dims"][0])
    assert s.emittable and s.kernels == ("scan", "scan", "scan")
    keys = [v.key for v in variant_menu(_plan(CASES["avg_pool3d"][0], {}, None)[1])]
    assert keys[0] == "default" and "window-256" in keys and "window-4096" in keys
    keys = [v.key for v in variant_menu(_plan(CASES["cumprod_dims"][0], {}, None)[1])]
    assert "scan-wide" in keys and "scan-1k" in keys


def test_variants_change_the_launch() -> None:
    gen = BuiltinGenerator()
    problem = CASES["avg_pool3d"][0]
    first = gen.generate(GenerationRequest(problem=problem, iteration=0))
    from tritonsmith.agents.base import Attempt

    tried = Attempt(iteration=0, source=first.source, result=None, feedback="", reward=0.0, generator="builtin",
                    variant=first.variant)
    second = gen.generate(GenerationRequest(problem=problem, iteration=1, history=[tried]))
    assert second.variant == "window-256" and second.source is not None and "BLOCK=256" in second.source
    assert "BLOCK=1024" in (first.source or "")


@pytest.mark.parametrize(("name", "forward", "inputs", "message"), [
    ("max_pool_indices", "x):\n        return F.max_pool2d(x, 2, return_indices=True)", "[torch.randn(1, 2, 6, 6)]",
     "return_indices=True"),
    ("cumsum_int", "x):\n        return torch.cumsum(x, 1)", "[torch.randint(0, 5, (3, 4))]", "integer"),
])
def test_refusals_say_why(name: str, forward: str, inputs: str, message: str) -> None:
    cand = BuiltinGenerator().generate(GenerationRequest(problem=_problem(name, "        pass", forward, inputs),
                                                         iteration=0))
    assert cand.source is None and cand.exhausted
    assert message in cand.note, cand.note


def test_pure_convolution_is_an_implicit_gemm_not_a_window() -> None:
    """A dense 3-D convolution is no window kernel: the implicit-GEMM family writes it (checked against the
    reference in test_builtin_convgemm.py)."""
    conv = _module("only_conv3d", "nn.Conv3d(2, 3, 3)", "1, 2, 5, 6, 7")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=conv, iteration=0))
    assert cand.source is not None and "_conv_0_kernel" in cand.source and "_window_" not in cand.source
    assert summarize(conv).kernels == ("conv",)
