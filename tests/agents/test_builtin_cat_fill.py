"""The built-in generator's concatenation (``torch.cat``) and constant fills (``zeros_like``, ``full``, ...):
small odd shapes, run for real on the Triton interpreter against the reference (atol = rtol = 1e-4, two
trials of fresh random inputs)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from tritonsmith.agents.base import Candidate, GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem

from _builtin_check import run_on_interpreter

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _problem(name: str, forward: str, inputs: str, init_args: str = "", init_inputs: str = "[]") -> Problem:
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self{init_args}):\n        super().__init__()\n"
           f"        self.dim = {'dim' if init_args else 0}\n\n"
           f"    def forward(self, {forward}\n\ndef get_inputs():\n    return {inputs}\n\n"
           f"def get_init_inputs():\n    return {init_inputs}\n")
    return Problem.from_source(src, name=name)


_EXCLUSIVE = ("x):\n        cumsum = torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim) - 1), "
              "dim=self.dim)\n        return torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), "
              "cumsum), dim=self.dim)")

CASES: dict[str, tuple[Problem, set[str]]] = {
    # name: (problem, kernel kinds expected); every case is checked on the interpreter
    "cat_dim0": (_problem("cat_dim0", "x, y):\n        return torch.cat([x, y], 0)",
                          "[torch.randn(3, 5, 7), torch.randn(2, 5, 7)]"), {"pointwise"}),
    "cat_dim1_three": (_problem("cat_dim1_three", "x, y, z):\n        return torch.cat([x, y, z], dim=1)",
                                "[torch.randn(3, 5, 7), torch.randn(3, 2, 7), torch.randn(3, 1, 7)]"), {"pointwise"}),
    "cat_last_views": (_problem(  # sources read through their own strides: a transpose and a slice
        "cat_last_views", "x, y):\n        return torch.cat((x.transpose(1, 2), y[:, :, 2:]), -1)",
        "[torch.randn(3, 7, 5), torch.randn(3, 5, 9)]"), {"pointwise"}),
    "cat_computed_and_input": (_problem(
        "cat_computed_and_input", "x, y):\n        return torch.cat([torch.sigmoid(x) * 2.0, y], 1)",
        "[torch.randn(5, 3), torch.randn(5, 4)]"), {"pointwise"}),
    "cat_reduction_and_input": (_problem(  # a row group's stored output as a source
        "cat_reduction_and_input", "x, y):\n        return torch.cat([x.sum(1, keepdim=True), y], 1)",
        "[torch.randn(5, 13), torch.randn(5, 3)]"), {"row", "pointwise"}),
    "cat_fills": (_problem(
        "cat_fills", "x):\n        z = torch.zeros_like(x[:, :1])\n"
        "        f = torch.full((x.shape[0], 2), 2.5, device=x.device)\n"
        "        return torch.cat((z, x, f, torch.ones(x.shape[0], 1, device=x.device)), 1)",
        "[torch.randn(5, 7)]"), {"pointwise"}),
    "fill_in_arithmetic": (_problem(
        "fill_in_arithmetic",
        "x):\n        return x * torch.full_like(x, 3.0) + torch.ones_like(x) - torch.zeros(7, device=x.device)",
        "[torch.randn(5, 7)]"), {"pointwise"}),
    # the concatenation is the scan's prologue (rewrite scan-of-padded-input): one kernel
    "exclusive_cumsum": (_problem("exclusive_cumsum", _EXCLUSIVE, "[torch.rand(3, 2500)]", ", dim", "[1]"),
                         {"scan"}),
    "exclusive_cumsum_dim0": (_problem("exclusive_cumsum_dim0", _EXCLUSIVE, "[torch.rand(9, 5, 3)]", ", dim", "[0]"),
                              {"scan"}),
    "cat_then_elementwise": (_problem(
        "cat_then_elementwise", "x, y):\n        return torch.tanh(torch.cat([x, torch.relu(y)], 0) * 0.5) + x.mean()",
        "[torch.randn(3, 5), torch.randn(4, 5)]"), {"pointwise"}),
    "cat_scan_and_input": (_problem(
        "cat_scan_and_input", "x):\n        return torch.cat([torch.cumsum(x, 1), x], 1)", "[torch.randn(3, 4)]"),
                           {"scan", "pointwise"}),
    "cat_then_softmax": (_problem(  # the cat group turns into a row group (softmax over the cat dim)
        "cat_then_softmax", "x, y):\n        return torch.softmax(torch.cat([x, y], 1), dim=1)",
        "[torch.randn(3, 5), torch.randn(3, 4)]"), {"row"}),
    "constant_mask_matmul": (_problem(  # Mamba's segsum mask: a kernel of constants feeding a matmul
        "constant_mask_matmul", "x):\n        t = x.size(-1)\n"
        "        mask = torch.tril(torch.ones(t, t, device=x.device), diagonal=0)\n        return torch.relu(x @ mask)",
        "[torch.randn(37, 29)]"), {"pointwise", "matmul"}),
}


@pytest.fixture(scope="module")
def generated() -> dict[str, Candidate]:
    gen = BuiltinGenerator()
    return {name: gen.generate(GenerationRequest(problem=p, iteration=0)) for name, (p, _) in CASES.items()}


@pytest.fixture(scope="module")
def interpreted(generated: dict[str, Candidate], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """All candidates checked in one interpreter subprocess (startup dominates the cost)."""
    pairs = {name: (problem.source, generated[name].source) for name, (problem, _) in CASES.items()}
    return run_on_interpreter(tmp_path_factory.mktemp("builtin_cat_fill"), pairs)


@pytest.mark.parametrize("name", list(CASES))
def test_cat_and_fill_match_reference_on_interpreter(name: str, generated: dict[str, Candidate],
                                                     interpreted: dict[str, Any]) -> None:
    cand = generated[name]
    assert cand.source is not None, cand.note
    for kind in CASES[name][1]:
        assert f"_{kind}_0_kernel" in cand.source, f"expected a {kind} kernel"
    model = cand.source.split("class ModelNew", 1)[1]
    assert "hybrid" not in cand.note and "torch.cat" not in model and "torch.cum" not in model
    result = interpreted[name]
    assert result["ok"], result["detail"]


def test_fills_are_inlined_and_sources_loaded_by_range(generated: dict[str, Candidate]) -> None:
    """A fill reads no memory (its value is a constant block); each cat source is a masked load of its range."""
    src = generated["exclusive_cumsum"].source or ""
    cat = src.split("def _scan_0_kernel(", 1)[1].split("\n\n\n", 1)[0]  # the cat is the scan's prologue
    assert cat.count("tl.load(") == 1 and "tl.full(lin.shape, 0.0, tl.float32)" in cat
    assert re.search(r"sel\d+_1 = \(c\d+ >= 1\)  #", cat)  # the scan's values start at index 1 along the cat dim
    fills = generated["cat_fills"].source or ""
    assert fills.count("tl.load(") == 1 and "2.5" in fills


def test_a_kernel_of_constants_takes_the_forwards_device(generated: dict[str, Candidate]) -> None:
    """It reads no tensor, so its launcher is told where to allocate; it runs on every call like the others."""
    src = generated["constant_mask_matmul"].source or ""
    assert "def _pointwise_0(device: torch.device):" in src
    assert re.search(r"= _pointwise_0\(x\.device\)", src), src.split("def forward", 1)[-1][:800]


def test_constant_output_is_refused() -> None:
    cand = BuiltinGenerator().generate(GenerationRequest(
        problem=_problem("const_out", "x):\n        return x + 1, torch.zeros_like(x)", "[torch.randn(3, 4)]"),
        iteration=0))
    assert cand.source is None and "constant" in cand.note, cand.note


@pytest.mark.parametrize("name", ["exclusive_cumsum", "cat_fills", "cat_then_softmax"])
def test_cat_kernels_compile_for_sm90(name: str, generated: dict[str, Candidate], tmp_path: Path) -> None:
    """The interpreter accepts code the compiler may not (``tl.full(lin.shape, ...)``, masks of ``tl.where``)."""
    from tritonsmith.profiler._aot import compile_kernel

    source = generated[name].source
    assert source is not None
    path = tmp_path / f"aot_{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    launches = [c for c in ast.walk(ast.parse(source)) if isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript)
                and isinstance(c.func.value, ast.Name)]
    assert launches
    for call in launches:
        fn = getattr(module, call.func.value.id)  # type: ignore[union-attr]
        kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        options = {k: kw.pop(k) for k in ("num_warps", "num_stages") if k in kw}
        signature = {p: "constexpr" if p in kw else ("*fp32" if p.endswith("_ptr") else "i32")
                     for p in inspect.signature(fn.fn).parameters}
        facts = compile_kernel(fn, signature, kw, arch=90, **options)
        assert facts.error is None, f"{name}: {facts.error}"
