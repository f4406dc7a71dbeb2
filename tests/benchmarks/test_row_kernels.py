"""benchmarks/row_kernels_gpu.py: its source variants change how a split row launcher runs, never what it computes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.benchmarks._scripts import load_script
from tritonsmith.agents.builtin import _plan
from tritonsmith.agents.builtin._emit import emit_module
from tritonsmith.core.problem import Problem

rowk = load_script("row_kernels_gpu")

BN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(5, 3, 37, 41)]


def get_init_inputs():
    return []
'''

_RUN = textwrap.dedent('''
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    sys.path.insert(0, sys.argv[1])
    import importlib.util
    spec = importlib.util.spec_from_file_location("rowk", sys.argv[2]); rowk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rowk)
    torch.manual_seed(0)
    x, w, b = torch.randn(5, 3, 37, 41), torch.randn(3), torch.randn(3)
    want = None
    for variant in rowk.VARIANTS:
        got = getattr(rowk.load(sys.argv[3], variant), "_row_0")(x, w, b)
        want = got if want is None else want
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), variant
    print("same under", ",".join(rowk.VARIANTS))
''')


def test_every_variant_of_a_split_launcher_computes_the_same(tmp_path: Path) -> None:
    problem = Problem.from_source(BN, name="bn_relu")
    # rows of 5 x 37 x 41 = 7585 values, split in 3 chunks so that the stats/apply pair is what runs
    overrides = {"row": {"split": 3, "BLOCK_R": 512}}
    traced, plan = _plan(problem, {}, None)
    src = emit_module(problem.name, problem.source, traced, plan, overrides, f"forced {overrides}")
    assert src is not None and "_row_0_stats0_kernel[" in src
    cand = tmp_path / "bn__split.py"
    cand.write_text(src)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    root = str(Path(__file__).resolve().parents[2] / "src")
    proc = subprocess.run([sys.executable, "-c", _RUN, root, str(rowk.__file__), str(cand)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "same under as-is,warps4,block1024,swapgrid" in proc.stdout


def test_swapgrid_swaps_the_program_axes_and_the_grid() -> None:
    import re

    src = ("c = tl.program_id(1)\nk = tl.program_id(0)\n"
           "_row_0_kernel[(triton.cdiv(32, 1), 31)](a0, BLOCK_R=2048, num_warps=8)\n")
    for pattern, repl in rowk.VARIANTS["swapgrid"]:
        src = re.sub(pattern, repl, src)
    assert src == ("c = tl.program_id(0)\nk = tl.program_id(1)\n"
                   "_row_0_kernel[(31, triton.cdiv(32, 1))](a0, BLOCK_R=2048, num_warps=8)\n")
