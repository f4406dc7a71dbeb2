"""``benchmarks/rewrites_gpu.py`` on the CPU: argument parsing, the shortlist, the sources it would time and
the table it prints (synthetic figures; nothing is timed here)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tritonsmith.core.problem import Problem

from _scripts import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("rewrites_gpu")


def test_arguments(bench: ModuleType, tmp_path: Path) -> None:
    args = bench.parse_args([str(tmp_path), "--json", str(tmp_path / "o.json"), "--levels", "2"])
    assert args.kernelbench == tmp_path and args.json == tmp_path / "o.json" and args.levels == [2]
    assert args.trials == 3 and args.problems is None
    with pytest.raises(SystemExit):
        bench.parse_args([str(tmp_path / "missing")])
    with pytest.raises(SystemExit):
        bench.parse_args([str(tmp_path), "--trials", "0"])


def test_shortlist_reads_sources_cheaply(bench: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "1_Gemm_Sum.py").write_text("self.l = nn.Linear(3, 4)\nx = x.sum(1)\n")
    (tmp_path / "level2" / "2_ReLU.py").write_text("return torch.relu(x)\n")
    (tmp_path / "level2" / "3_Gemm_Only.py").write_text("self.l = nn.Linear(3, 4)\nreturn self.l(x)\n")
    assert [p.name for p in bench.shortlist(tmp_path, [1, 2])] == ["1_Gemm_Sum.py"]
    assert bench.shortlist(tmp_path, [2], ["level2/2_ReLU"]) == [tmp_path / "level2" / "2_ReLU.py"]


def test_table_rows_gain_and_failures(bench: ModuleType) -> None:
    ok = {"status": "correct", "message": "", "ms": 0.25, "vs_eager": 11.2, "ci_eager": [11.0, 11.4],
          "vs_compile": 12.0, "ci_compile": [11.8, 12.3]}
    plain = {"status": "correct", "message": "", "ms": 2.0, "vs_eager": 1.4, "ci_eager": None, "vs_compile": 1.5,
             "ci_compile": [1.48, 1.52]}
    wrong = {"status": "wrong_output", "message": "max abs error 3.1 | at [0, 5]"}
    text = bench.table([{"problem": "level2/98_X", "rewrites": ["linear-of-pooled-weights"], "variant": "default",
                         "rewritten": ok, "plain": plain},
                        {"problem": "level2/1_Y", "rewrites": ["a", "b"], "variant": "mm-aligned", "rewritten": wrong,
                         "plain": plain}]).splitlines()
    assert len(text) == 4 and text[0].count("|") == 11
    assert "| `level2/98_X` | linear-of-pooled-weights | default | 0.2500 | 11.20x [11.00, 11.40] | " \
           "12.00x [11.80, 12.30] | 2.0000 | 1.40x | 1.50x [1.48, 1.52] | 8.00x |" == text[2]
    assert "wrong_output: max abs error 3.1" in text[3] and text[3].endswith("| - |")
    assert "no problem where a rewrite fires" in bench.table([])


def test_sources_of_a_firing_and_a_plain_problem(bench: ModuleType) -> None:
    head = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
    src = (head + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.l = nn.Linear(37, 29)\n\n    def forward(self, x):\n        return self.l(x).sum(1)\n\n"
           "def get_inputs():\n    return [torch.randn(11, 37)]\n\ndef get_init_inputs():\n    return []\n")
    found = bench.sources(Problem.from_source(src, name="gemm_sum"))
    assert found is not None
    rewrites, key, rewritten, plain = found
    assert rewrites == ["gemv-of-reduced-weights"] and "rewrites: gemv-of-reduced-weights" in rewritten
    assert "_matmul_0_kernel" in plain and "_matmul_0_kernel" not in rewritten
    relu = src.replace("self.l(x).sum(1)", "torch.relu(self.l(x)).sum(1)")
    assert bench.sources(Problem.from_source(relu, name="gemm_relu_sum")) is None
