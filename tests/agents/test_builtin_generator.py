"""The built-in generator: each pattern family on small odd shapes, run for real on the Triton
interpreter against the reference (atol = rtol = 1e-4, two trials of fresh random inputs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tritonsmith.agents.base import Attempt, Candidate, GenerationRequest, Generator
from tritonsmith.agents.builtin import BuiltinGenerator, summarize
from tritonsmith.problem import Problem
from tritonsmith.tools._results import EvalResult, EvalStatus

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _problem(name: str, init: str, forward: str, inputs: str, init_inputs: str = "[]") -> Problem:
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self, *args):\n        super(Model, self).__init__()\n"
           f"{init}\n    def forward(self, {forward}\n\n"
           f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return {init_inputs}\n")
    return Problem.from_source(src, name=name)


CASES: dict[str, tuple[Problem, set[str], tuple[str, ...]]] = {
    # name: (problem, kernel kinds expected, torch ops expected to remain)
    "elementwise_broadcast": (_problem(
        "elementwise_broadcast", "        self.bias = nn.Parameter(torch.randn(5, 1, 1))",
        "x):\n        y = torch.sigmoid(x) * x + self.bias\n        y = torch.clamp(F.gelu(y), min=-0.3, max=0.9)\n"
        "        return F.leaky_relu(y - x.abs(), 0.2).to(torch.float32)",
        "[torch.randn(3, 5, 7, 9)]"), {"pointwise"}, ()),
    "softmax_logsoftmax": (_problem(
        "softmax_logsoftmax", "        pass",
        "x):\n        return torch.softmax(x, dim=1) + torch.log_softmax(x, dim=1)",
        "[torch.randn(7, 333)]"), {"row"}, ()),
    "reductions_dim1": (_problem(
        "reductions_dim1", "        pass",
        "x):\n        return torch.sum(x, dim=1) + torch.max(x, dim=1)[0] * torch.mean(x, dim=1) - x.amin(dim=1)",
        "[torch.randn(3, 37, 11)]"), {"row"}, ()),
    "argmax_argmin": (_problem(
        "argmax_argmin", "        pass",
        "x):\n        return torch.argmax(x, dim=1), torch.argmin(x, dim=2)",
        "[torch.randn(4, 19, 13)]"), {"row"}, ()),
    "layer_rms_norm": (_problem(
        "layer_rms_norm", "        self.ln = nn.LayerNorm((6, 13))",
        "x):\n        y = self.ln(x)\n        return y / torch.sqrt(torch.mean(y ** 2, dim=1, keepdim=True) + 1e-5)",
        "[torch.randn(5, 6, 13)]"), {"row"}, ()),
    "group_batch_instance_norm": (_problem(
        "group_batch_instance_norm",
        "        self.gn = nn.GroupNorm(3, 6)\n        self.bn = nn.BatchNorm2d(6)\n"
        "        self.inorm = nn.InstanceNorm2d(6)",
        "x):\n        return self.inorm(self.bn(self.gn(x)))",
        "[torch.randn(3, 6, 5, 7)]"), {"row"}, ()),
    "losses": (_problem(
        "losses", "        pass",
        "p, t, y):\n        return (F.cross_entropy(p, y) + F.smooth_l1_loss(p, t)\n"
        "                + torch.mean(torch.clamp(1 - p * t, min=0)))",
        "[torch.randn(9, 21), torch.randn(9, 21), torch.randint(0, 21, (9,))]"), {"row"}, ()),
    "linear_epilogue": (_problem(
        "linear_epilogue", "        self.fc = nn.Linear(45, 29)",
        "x):\n        return torch.relu(self.fc(x)) / 2.0 + 0.5", "[torch.randn(37, 45)]"), {"matmul"}, ()),
    "bmm_and_matvec": (_problem(
        "bmm_and_matvec", "        pass",
        "a, b, v):\n        return torch.bmm(a, b).sum(dim=2, keepdim=True) + torch.matmul(a[0], v)",
        "[torch.randn(3, 17, 23), torch.randn(3, 23, 19), torch.randn(23, 1)]"), {"matmul", "row"}, ()),
    "hybrid_conv_chain": (_problem(
        "hybrid_conv_chain", "        self.conv = nn.Conv2d(3, 5, 3)\n        self.bias = nn.Parameter(torch.randn(5, 1, 1))",
        "x):\n        x = self.conv(x)\n        x = torch.relu(x) + self.bias\n"
        "        return torch.tanh(F.max_pool2d(x, 2)) * 2.0",
        "[torch.randn(2, 3, 11, 13)]"), {"pointwise"}, ("conv", "max_pool")),
}


@pytest.fixture(scope="module")
def generated() -> dict[str, Candidate]:
    gen = BuiltinGenerator()
    return {name: gen.generate(GenerationRequest(problem=p, iteration=0)) for name, (p, _, _) in CASES.items()}


@pytest.fixture(scope="module")
def interpreted(generated: dict[str, Candidate], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """All candidates checked in one interpreter subprocess (startup dominates the cost)."""
    d = tmp_path_factory.mktemp("builtin")
    cases = []
    for name, (problem, _, _) in CASES.items():
        cand = generated[name]
        if cand.source is None:
            continue
        (d / f"{name}_ref.py").write_text(problem.source)
        (d / f"{name}_cand.py").write_text(cand.source)
        cases.append({"name": name, "problem": str(d / f"{name}_ref.py"), "candidate": str(d / f"{name}_cand.py")})
    (d / "cases.json").write_text(json.dumps(cases))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    helper = Path(__file__).with_name("_builtin_check.py")
    proc = subprocess.run([sys.executable, str(helper), str(d / "cases.json")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_is_a_generator() -> None:
    gen = BuiltinGenerator()
    assert isinstance(gen, Generator)
    assert gen.name == "builtin"


@pytest.mark.parametrize("name", list(CASES))
def test_pattern_family_matches_reference_on_interpreter(name: str, generated: dict[str, Candidate],
                                                         interpreted: dict[str, Any]) -> None:
    cand = generated[name]
    assert cand.source is not None, cand.note
    _, kinds, torch_ops = CASES[name]
    for kind in kinds:
        assert f"_{kind}_0_kernel" in cand.source, f"expected a {kind} kernel"
    assert "@triton.jit" in cand.source and "class ModelNew(nn.Module)" in cand.source
    for op in torch_ops:
        assert op in cand.note, cand.note
    if not torch_ops:
        assert "hybrid" not in cand.note and "F.conv" not in cand.source
    result = interpreted[name]
    assert result["ok"], result["detail"]


def test_kernel_style(generated: dict[str, Candidate]) -> None:
    src = generated["linear_epilogue"].source
    assert src is not None
    assert "def _matmul_0_kernel(" in src and "def _matmul_0(" in src  # private kernel + launcher
    assert "BLOCK_M: tl.constexpr" in src and 'input_precision=PRECISION' in src
    assert "PRECISION='tf32x3'" in src  # never plain tf32 for fp32 under the kernelbench tolerance
    assert "Math (fp32):" in src
    compile(src, "<candidate>", "exec")


def test_refuses_pure_torch_wrapper() -> None:
    conv = _problem("only_conv", "        self.conv = nn.Conv2d(3, 4, 3)", "x):\n        return self.conv(x)",
                    "[torch.randn(1, 3, 9, 9)]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=conv, iteration=0))
    assert cand.source is None and cand.exhausted
    assert "torch wrapper" in cand.note and "conv" in cand.note
    assert not summarize(conv).emittable


def test_refuses_random_dropout() -> None:
    p = _problem("dropout", "        self.d = nn.Dropout(0.3)", "x):\n        return self.d(torch.relu(x))",
                 "[torch.randn(4, 5)]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=p, iteration=0))
    assert cand.source is None and "random" in cand.note


def _result(status: EvalStatus) -> EvalResult:
    return EvalResult(status=status, message=str(status), problem="p", device="cuda", device_name="x",
                      tolerance="kernelbench")


def test_refinement_walks_variants_and_switches_to_ieee_after_wrong_output() -> None:
    problem = CASES["linear_epilogue"][0]
    gen = BuiltinGenerator()
    first = gen.generate(GenerationRequest(problem=problem, iteration=0))
    assert first.variant == "default" and not first.exhausted
    wrong = Attempt(iteration=0, source=first.source, result=_result(EvalStatus.WRONG_OUTPUT), feedback="",
                    reward=0.0, generator="builtin", variant=first.variant)
    second = gen.generate(GenerationRequest(problem=problem, iteration=1, history=[wrong]))
    assert second.variant == "ieee" and second.source is not None
    assert "PRECISION='ieee'" in second.source
    history = [wrong, Attempt(iteration=1, source=second.source, result=_result(EvalStatus.CORRECT), feedback="",
                              reward=1.0, generator="builtin", variant=second.variant)]
    seen = {first.variant, second.variant}
    for i in range(2, 12):
        cand = gen.generate(GenerationRequest(problem=problem, iteration=i, history=history))
        if cand.source is None:
            assert cand.exhausted and "variants tried" in cand.note
            break
        assert cand.variant not in seen and cand.variant.endswith("+ieee")  # keeps the precision that passed
        assert "PRECISION='ieee'" in cand.source
        seen.add(cand.variant)
        history.append(Attempt(iteration=i, source=cand.source, result=_result(EvalStatus.CORRECT), feedback="",
                               reward=1.0, generator="builtin", variant=cand.variant))
    else:
        pytest.fail("the generator never ran out of variants")
    assert len(seen) >= 3


def test_split_k_for_long_k() -> None:
    p = _problem("long_k", "        pass", "a, b):\n        return torch.matmul(a, b)",
                 "[torch.randn(64, 32768), torch.randn(32768, 48)]")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=p, iteration=0))
    assert cand.source is not None and "split-K" in cand.note
    assert "_row_0_kernel" in cand.source  # the partial products are summed by a row kernel
