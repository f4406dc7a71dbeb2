"""Pooling window kernels (``_window.py``): the ``window-rows`` launch (one output row per program row, a block
of its columns per program) against the reference on the interpreter, at odd sizes with padding, dilation,
ceil mode and a fused epilogue that reads another tensor; offered only where rows are long."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonsmith.agents.builtin import _plan, menu_for, variant_label
from tritonsmith.agents.builtin._emit import emit_module
from tritonsmith.core.problem import Problem

from _builtin_check import run_on_interpreter

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _problem(name: str, body: str, shape: str, init: str = "pass") -> Problem:
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        {init}\n\n"
           f"    def forward(self, x):\n        return {body}\n\n"
           f"def get_inputs():\n    return [torch.randn({shape})]\n\ndef get_init_inputs():\n    return []\n")
    return Problem.from_source(src, name=name)


LONG_ROWS = {
    "maxpool1d_dilated": _problem("maxpool1d_dilated", "F.max_pool1d(x, 8, stride=1, padding=4, dilation=3)",
                                  "2, 3, 2101"),
    "avgpool2d_ceil_exclusive": _problem("avgpool2d_ceil_exclusive",
                                         "F.avg_pool2d(x, 3, stride=(2, 1), padding=1, ceil_mode=True, "
                                         "count_include_pad=False) + self.b",
                                         "2, 3, 5, 2101", "self.b = nn.Parameter(torch.randn(3, 1, 1))"),
    "maxpool3d_strided": _problem("maxpool3d_strided", "torch.relu(F.max_pool3d(x, (2, 2, 3), stride=(1, 2, 1)))",
                                  "1, 2, 3, 4, 2050"),
}


def _rows_source(problem: Problem) -> str:
    variant = next(v for v in menu_for(problem, None)[0] if v.key == "window-rows")
    traced, plan = _plan(problem, variant.options, None)
    return emit_module(problem.name, problem.source, traced, plan, variant.overrides, variant_label(variant, traced))


def test_window_rows_matches_reference(tmp_path: Path) -> None:
    pairs = {}
    for name, problem in LONG_ROWS.items():
        src = _rows_source(problem)
        assert "row = tl.program_id(0)" in src and "col = tl.program_id(1) * BLOCK" in src, src
        assert "shape-generic" not in src or "lead" in src
        pairs[name] = (problem.source, src)
    checked = run_on_interpreter(tmp_path, pairs)
    for name, result in checked.items():
        assert result["ok"], (name, result["detail"])


@pytest.mark.parametrize("shape", ["2, 3, 999", "4, 64, 17, 19"])
def test_window_rows_is_not_offered_for_short_rows(shape: str) -> None:
    problem = _problem("short", "F.max_pool1d(x, 3)" if shape.count(",") == 2 else "F.avg_pool2d(x, 2)", shape)
    assert all(v.key != "window-rows" for v in menu_for(problem, None)[0])


def test_window_rows_is_not_offered_for_a_depthwise_convolution() -> None:
    """A depthwise convolution is a window group too, written by its own kernel: no rows option, and it plans."""
    problem = _problem("dw_long", "self.dw(x)", "2, 4, 2101", "self.dw = nn.Conv1d(4, 4, 3, padding=1, groups=4)")
    menu = menu_for(problem, None)[0]
    assert menu and all(v.key != "window-rows" for v in menu)
