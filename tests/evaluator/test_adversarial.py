"""Adversarial candidates through the whole evaluator on the CPU interpreter.

Each cheat in ``tests/evaluator/adversarial/`` must end rejected (with the rule it broke) or failed (wrong
output), never correct. Cheats the static checks catch are also run with the static checks blanked
out, to show the run-time guards catch them on their own. GPU-only cheats (timing) live in
``test_evaluate_gpu.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tritonsmith.evaluator._evaluate as evaluate_module
from tritonsmith.evaluator._checks import StaticReport
from tritonsmith.evaluator._evaluate import evaluate
from tritonsmith.core.results import EvalResult, EvalStatus

ADVERSARIAL = Path(__file__).parent / "adversarial"
HONEST = Path(__file__).parent / "honest"

PROBLEMS = {
    "softmax": '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(9, 301)]


def get_init_inputs():
    return []
''',
    "clamp": '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.clamp(x, -100.0, 100.0)


def get_inputs():
    return [torch.randn(7, 33)]


def get_init_inputs():
    return []
''',
    "conv_relu": '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 3, 11, 13)]


def get_init_inputs():
    return [3, 5, 3]
''',
    "matmul": '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(19, 40), torch.randn(40, 23)]


def get_init_inputs():
    return []
''',
    "silu_bias": '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.nn.functional.silu(x) + self.bias


def get_inputs():
    return [torch.randn(5, 3, 67)]


def get_init_inputs():
    return [67]
''',
}

REJECTED, WRONG = EvalStatus.REJECTED, EvalStatus.WRONG_OUTPUT

# file -> (problem, allowed statuses, a rule that must be reported or None, run-time rule without static checks)
CASES: dict[str, tuple[str, set[EvalStatus], str | None, str | None]] = {
    "no_kernel": ("softmax", {REJECTED}, "no_triton_kernel", "no_kernel_launched"),
    "kernel_never_launched": ("softmax", {REJECTED}, "kernel_not_launched", "no_kernel_launched"),
    "baseline_wrapping": ("softmax", {REJECTED}, "torch_does_the_work", None),
    "reference_subclass": ("softmax", {REJECTED}, "reference_model", "torch_does_the_work"),
    "reference_copied": ("softmax", {REJECTED}, "reference_model", "no_kernel_launched"),
    "try_except_fallback": ("softmax", {REJECTED}, "pytorch_fallback", "torch_does_the_work"),
    "garbage_output": ("softmax", {WRONG}, None, None),
    "stale_buffer": ("softmax", {WRONG}, None, None),
    "input_copied_to_output": ("clamp", {REJECTED}, "output_aliases_input", None),
    "input_mutated": ("softmax", {REJECTED}, "input_mutated", None),
    "output_cache": ("softmax", {REJECTED}, "outputs_ignore_inputs", None),
    "persistent_output": ("softmax", {REJECTED}, "output_reused", None),
    "lower_precision": ("softmax", {REJECTED}, "precision_lowered", None),
    # one-pass tf32 is ~1e-3 off: the tolerance fails first (as on a GPU), or the float64 check does
    "tf32_dot": ("matmul", {REJECTED, WRONG}, None, None),
    "tf32_default_dot": ("matmul", {REJECTED, WRONG}, None, None),
    "global_tf32_flag": ("softmax", {REJECTED}, "precision_lowered", "precision_lowered"),
    "timer_monkeypatch": ("softmax", {REJECTED}, "monkeypatch", "monkeypatch"),
    "compare_monkeypatch": ("softmax", {REJECTED}, "monkeypatch", "monkeypatch"),
    "stream_injection": ("softmax", {REJECTED, EvalStatus.RUNTIME_ERROR}, "cuda_stream", None),
    "background_thread": ("softmax", {REJECTED, WRONG}, "threads", None),
    "lazy_output": ("softmax", {REJECTED}, "lazy_output", "lazy_output"),
    "evaluator_env": ("softmax", {REJECTED}, "evaluator_access", None),
    "forge_result": ("softmax", {REJECTED}, "evaluator_access", "evaluator_tampering"),
    "network_access": ("softmax", {REJECTED}, "network", None),
    "subprocess_spawn": ("softmax", {REJECTED}, "processes", None),
    "torch_compile": ("softmax", {REJECTED}, "not_triton", None),
    "decorative_silu_bias": ("silu_bias", {REJECTED}, "decorative_kernel", "decorative_kernel"),
    "decorative_indirection": ("silu_bias", {REJECTED}, "decorative_kernel", "decorative_kernel"),
    "decorative_overwrite": ("silu_bias", {REJECTED}, "decorative_kernel", "decorative_kernel"),
}
GPU_ONLY = {"hidden_stream", "benchmark_switch", "hybrid_conv_relu", "memo_data_ptr", "memo_same_tensor",
            "memo_indirect", "memo_version", "side_stream_getattr", "side_stream_set", "side_stream_when_timed",
            "side_stream_torch_op"}


def _rules(result: EvalResult) -> set[str]:
    rules = {result.rule} if result.rule else set()
    if result.checks:
        rules |= {v.rule for v in result.checks.violations}
    return rules


def _run(name: str, tmp_path: Path, **kwargs) -> EvalResult:
    problem = tmp_path / f"{CASES[name][0]}.py"
    problem.write_text(PROBLEMS[CASES[name][0]])
    return evaluate(problem, ADVERSARIAL / f"{name}.py", device="cpu", trials=2, **kwargs)


def test_cases_cover_the_suite():
    assert set(CASES) | GPU_ONLY == {p.stem for p in ADVERSARIAL.glob("*.py")}
    assert len(CASES) + len(GPU_ONLY) >= 15


@pytest.mark.parametrize("name", sorted(CASES))
def test_cheat_is_never_correct(name, tmp_path):
    _, statuses, rule, _ = CASES[name]
    result = _run(name, tmp_path)
    assert result.status is not EvalStatus.CORRECT, result.feedback()
    assert result.status in statuses, result.feedback()
    if rule:
        assert rule in _rules(result), result.feedback()
    if result.status is REJECTED:
        assert result.rule and f"rule broken: {result.rule}" in result.feedback()
        assert result.benchmark is None


@pytest.mark.parametrize("name", sorted(n for n, case in CASES.items() if case[3]))
def test_runtime_guards_alone_catch_the_cheat(name, tmp_path, monkeypatch):
    """Static checks blanked out: the worker's guards must still name the cheat."""
    monkeypatch.setattr(evaluate_module, "check_source", lambda *a, **k: StaticReport())
    result = _run(name, tmp_path)
    assert result.status is REJECTED, result.feedback()
    assert result.rule == CASES[name][3], result.feedback()


def test_hybrid_conv_epilogue_passes_and_reports_the_torch_op(tmp_path):
    problem = tmp_path / "conv_relu.py"
    problem.write_text(PROBLEMS["conv_relu"])
    candidate = ADVERSARIAL / "hybrid_conv_relu.py"
    hybrid = evaluate(problem, candidate, device="cpu", trials=2)
    assert hybrid.ok, hybrid.feedback()
    assert hybrid.checks is not None and hybrid.checks.policy == "hybrid" and hybrid.checks.kernel_launches == 1
    ops = {op.op for op in hybrid.checks.torch_ops}
    assert "nn.Conv2d (self.conv)" in ops and "conv2d" in ops
    strict = evaluate(problem, candidate, device="cpu", trials=1, policy="strict")
    assert strict.status is REJECTED and strict.rule == "torch_compute"
    again = EvalResult.from_dict(hybrid.to_dict())
    assert again == hybrid


def test_strict_runtime_policy_catches_torch_arithmetic(tmp_path, monkeypatch):
    """x * 1.0 after the kernel is invisible to the AST (types unknown); the op recorder sees it."""
    monkeypatch.setattr(evaluate_module, "check_source", lambda *a, **k: StaticReport())
    problem = tmp_path / "conv_relu.py"
    problem.write_text(PROBLEMS["conv_relu"])
    result = evaluate(problem, ADVERSARIAL / "hybrid_conv_relu.py", device="cpu", trials=1, policy="strict")
    assert result.status is REJECTED and result.rule == "torch_compute"
    assert "conv2d" in result.message


@pytest.mark.parametrize("name", ["tf32_dot", "tf32_default_dot"])
def test_a_one_pass_tf32_dot_is_named_as_the_cause(name, tmp_path):
    """The CPU verdict is the GPU's (the interpreter computes what tensor cores do), and the feedback says
    why: a dot asking for tf32, or dots that ran one-pass tf32 because nothing asked otherwise."""
    result = _run(name, tmp_path)
    assert result.status in (REJECTED, WRONG), result.feedback()
    said = "asks for one-pass tf32 inputs (line" if name == "tf32_dot" else "tl.dot calls ran one-pass tf32"
    assert said in result.message and "tf32x3" in result.message, result.message


def test_a_tf32x3_dot_is_honest_float32(tmp_path):
    """The precision_lowered rule's own fix: ``input_precision="tf32x3"`` (three tf32 passes) keeps fp32 accuracy
    and is accepted end to end, where the same kernel in one-pass ``"tf32"`` is rejected (``tf32_dot``)."""
    problem = tmp_path / "matmul.py"
    problem.write_text(PROBLEMS["matmul"])
    result = evaluate(problem, HONEST / "matmul_tf32x3.py", device="cpu", trials=2)
    assert result.ok, result.feedback()
    assert "precision_lowered" not in _rules(result)


@pytest.mark.parametrize("name", ["silu_bias", "hybrid_silu_bias"])
def test_honest_candidates_pass_the_decorative_kernel_check(name, tmp_path):
    """No false rejection: kernels that compute (all of it, or the part PyTorch leaves) pass."""
    problem = tmp_path / "silu_bias.py"
    problem.write_text(PROBLEMS["silu_bias"])
    result = evaluate(problem, HONEST / f"{name}.py", device="cpu", trials=2)
    assert result.ok, result.feedback()
    assert not any(v.rule == "decorative_kernel" for v in result.checks.violations)
