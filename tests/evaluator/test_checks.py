"""Static checks: every adversarial candidate is caught with the right rule; honest code never is."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tritonsmith.examples import example_path
from tritonsmith.evaluator._checks import check_source

ADVERSARIAL = Path(__file__).parent / "adversarial"
REPO = Path(__file__).resolve().parents[2]
SOFTMAX_REF = example_path("softmax_reference.py").read_text()

HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"
KERNEL = '''
@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    """out = x * SCALE"""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)
'''


def _rules(source: str, **kwargs) -> set[str]:
    return {v.rule for v in check_source(source, reference_source=SOFTMAX_REF, **kwargs).violations}


# file -> rules the static checks must report (empty: only the run-time guards can see this cheat)
STATIC_EXPECTED = {
    "background_thread": {"threads"},
    "baseline_wrapping": set(),
    "benchmark_switch": set(),
    "compare_monkeypatch": {"monkeypatch"},
    "evaluator_env": {"evaluator_access"},
    "forge_result": {"evaluator_access"},
    "garbage_output": set(),
    "global_tf32_flag": {"precision_lowered"},
    "hidden_stream": {"introspection"},
    "hybrid_conv_relu": set(),
    "input_copied_to_output": set(),
    "input_mutated": set(),
    "kernel_never_launched": {"kernel_not_launched"},
    "lazy_output": {"lazy_output"},
    "lower_precision": set(),
    "network_access": {"network", "pytorch_fallback"},
    "no_kernel": {"no_triton_kernel"},
    "output_cache": set(),
    "persistent_output": set(),
    "reference_copied": {"reference_model", "kernel_not_launched"},
    "reference_subclass": {"reference_model"},
    "stale_buffer": set(),
    "stream_injection": {"cuda_stream"},
    "subprocess_spawn": {"processes"},
    "tf32_dot": set(),
    "tf32_default_dot": set(),  # nothing to see statically: the interpreter computes the tensor cores' tf32
    "timer_monkeypatch": {"monkeypatch"},
    "torch_compile": {"not_triton"},
    "try_except_fallback": {"pytorch_fallback"},
    # run-time only (issue 17): memoisation, side streams and decorative kernels reached by indirection
    "decorative_indirection": set(),
    "decorative_overwrite": set(),
    "decorative_silu_bias": set(),
    "memo_data_ptr": set(),
    "memo_indirect": set(),
    "memo_same_tensor": set(),
    "memo_version": set(),
    "side_stream_getattr": set(),
    "side_stream_set": set(),
    "side_stream_torch_op": set(),
    "side_stream_when_timed": set(),
}


def test_every_adversarial_file_has_an_expectation():
    assert {p.stem for p in ADVERSARIAL.glob("*.py")} == set(STATIC_EXPECTED)


@pytest.mark.parametrize("name", sorted(STATIC_EXPECTED))
def test_adversarial_static_rules(name):
    report = check_source((ADVERSARIAL / f"{name}.py").read_text(), reference_source=SOFTMAX_REF)
    assert {v.rule for v in report.violations} == STATIC_EXPECTED[name], [v.message for v in report.violations]
    for v in report.violations:
        assert v.message and (v.line is None or f"line {v.line}" in v.message)


def test_tf32_dot_is_found_for_the_worker():
    report = check_source((ADVERSARIAL / "tf32_dot.py").read_text())
    assert report.tf32_lines == [18]
    src = HEADER + KERNEL.replace("* SCALE", "* SCALE") + textwrap.dedent('''
    @triton.jit
    def _mm(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
        r = tl.arange(0, BLOCK)
        a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
        tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, a, allow_tf32=True))
        tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, a, input_precision="ieee"))
    ''')
    assert len(check_source(src).tf32_lines) == 1


_MM_KERNEL = '''
@triton.jit
def _mm(a_ptr, c_ptr, BLOCK: tl.constexpr, PRECISION: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, a, input_precision=PRECISION))


def launch(a, c):
    _mm[(1,)](a, c, BLOCK=16, PRECISION={precision!r})
'''


@pytest.mark.parametrize("precision, flagged", [("tf32x3", False), ("ieee", False), ("tf32", True)])
def test_tf32x3_keeps_fp32_accuracy_and_a_tf32_precision_passed_through_a_parameter_is_found(precision, flagged):
    """The rule's own fix names the tf32x3 split: a literal ``input_precision="tf32x3"`` is not
    ``precision_lowered``; one-pass tf32 is, written at the dot or set by the launch (as the built-in generator
    passes ``PRECISION``), positionally too."""
    literal = HEADER + _MM_KERNEL.replace("input_precision=PRECISION", f"input_precision={precision!r}")
    assert bool(check_source(literal.format(precision="ieee")).tf32_lines) is flagged
    through = HEADER + _MM_KERNEL.format(precision=precision)
    dot = [i for i, line in enumerate(through.splitlines(), 1) if "tl.dot" in line]
    assert check_source(through).tf32_lines == (dot if flagged else [])
    positional = through.replace(f"BLOCK=16, PRECISION={precision!r}", f"16, {precision!r}")
    assert positional != through
    assert check_source(positional).tf32_lines == (dot if flagged else [])


def test_hybrid_allows_torch_for_some_ops_and_reports_them_strict_does_not():
    source = (ADVERSARIAL / "hybrid_conv_relu.py").read_text()
    hybrid = check_source(source, policy="hybrid")
    assert not hybrid.violations
    assert [op.op for op in hybrid.torch_ops] == ["nn.Conv2d (self.conv)"]
    strict = check_source(source, policy="strict")
    assert {v.rule for v in strict.violations} == {"torch_compute"}
    assert "nn.Conv2d" in strict.violations[0].message


def test_bundled_example_is_clean_under_both_policies():
    source = example_path("softmax_triton.py").read_text()
    for policy in ("hybrid", "strict"):
        report = check_source(source, policy=policy, reference_source=SOFTMAX_REF)
        assert not report.violations and not report.torch_ops
        assert report.launched == ["_softmax_kernel"]


HONEST_LAUNCHERS = {
    "helper_chain": '''
def _launch(kernel, x, out):
    n = x.numel()
    kernel[(triton.cdiv(n, 256),)](x, out, n, SCALE=2.0, BLOCK=256)

def scale(x):
    x = x.contiguous().view(-1)
    out = torch.empty_like(x)
    assert x.stride(0) == 1 and x.is_contiguous() and x.dtype == torch.float32
    _launch(_scale_kernel, x, out)
    return out.view_as(x)

class ModelNew(nn.Module):
    def forward(self, x):
        return scale(x).reshape(x.shape)
''',
    "self_attribute_and_autograd_function": '''
class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty(x.shape, device=x.device, dtype=x.dtype)
        _scale_kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), SCALE=2.0, BLOCK=128)
        return out

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = _Scale.apply

    def forward(self, x):
        return self.op(x)
''',
    "kernel_table_and_wrapper_class": '''
KERNELS = {"scale": _scale_kernel}

class TritonScale:
    def __call__(self, x):
        out = x.new_empty(x.shape)
        KERNELS["scale"][(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), SCALE=2.0, BLOCK=64)
        return out

class ModelNew(nn.Module):
    def __init__(self, features=3):
        super().__init__()
        self.linear = nn.Linear(features, features)  # same parameters as Model, used by the kernel
        self.impl = TritonScale()

    def forward(self, x):
        try:
            y = self.impl(x)
        except ValueError as exc:
            raise RuntimeError("bad input") from exc
        w = self.linear.weight
        return y if w.numel() else torch.zeros_like(y)
''',
    "autotuned_and_from_import": '''
from triton import jit, autotune, Config

@autotune(configs=[Config({"BLOCK": 64}), Config({"BLOCK": 128})], key=["n"])
@jit
def _tuned_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

class ModelNew(nn.Module):
    """Generated by tritonsmith; reads spec.json? No: docstrings are not code."""

    def forward(self, x):
        out = torch.empty_like(x)
        grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)
        _tuned_kernel[grid](x, out, x.numel())
        return out
''',
}


@pytest.mark.parametrize("name", sorted(HONEST_LAUNCHERS))
def test_honest_launchers_are_not_rejected(name):
    source = HEADER + KERNEL + textwrap.dedent(HONEST_LAUNCHERS[name])
    ast.parse(source)
    for policy in ("hybrid", "strict"):
        report = check_source(source, policy=policy, reference_source=SOFTMAX_REF)
        assert not report.violations, [v.message for v in report.violations]
        assert report.launched


@pytest.mark.parametrize(
    ("snippet", "rule"),
    [
        ("import os\nKEY = os.environ.get('HOME')", "evaluator_access"),
        ("import sys\nARGS = sys.argv", "evaluator_access"),
        ("import gc\n", "introspection"),
        ("import sys\nF = sys._getframe(1).f_back", "introspection"),
        ("CODE = exec('x = 1')", "dynamic_code"),
        ("M = __import__('time')", "dynamic_code"),
        ("import socket\n", "network"),
        ("from concurrent.futures import ThreadPoolExecutor\n", "threads"),
        ("import multiprocessing as mp\n", "processes"),
        ("import os\nos.system('true')", "processes"),
        ("import time as t\nt.perf_counter = lambda: 0.0", "monkeypatch"),
        ("setattr(torch.cuda, 'synchronize', lambda: None)", "monkeypatch"),
        ("torch.Tensor.__eq__ = lambda a, b: True", "monkeypatch"),
        ("torch.set_float32_matmul_precision('high')", "precision_lowered"),
        ("S = torch.cuda.Stream()", "cuda_stream"),
        ("import torch._inductor\n", "not_triton"),
        ("from torch.utils.cpp_extension import load_inline\n", "not_triton"),
        ("P = '/proc/self/environ'", "evaluator_access"),
        ("import tritonsmith.evaluator._bench as b\n", "introspection"),
        ("OPS = torch.ops.aten._softmax", "introspection"),
    ],
)
def test_forbidden_constructs(snippet, rule):
    source = HEADER + snippet + "\n" + KERNEL + textwrap.dedent('''
    class ModelNew(nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            _scale_kernel[(1,)](x, out, x.numel(), SCALE=1.0, BLOCK=1024)
            return out
    ''')
    assert rule in _rules(source)


def test_kernel_launched_only_in_init_is_not_launched_from_forward():
    source = HEADER + KERNEL + textwrap.dedent('''
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.empty(8)
            _scale_kernel[(1,)](self.w, self.w, 8, SCALE=1.0, BLOCK=8)

        def forward(self, x):
            return x * 2
    ''')
    report = check_source(source, policy="hybrid")
    assert {v.rule for v in report.violations} == {"kernel_not_launched"}
    assert [op.line for op in report.torch_ops] == [] or report.torch_ops == []


def test_fallback_with_pass_or_return_is_caught_but_reraise_is_not():
    body = '''
    class ModelNew(nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            try:
                _scale_kernel[(1,)](x, out, x.numel(), SCALE=1.0, BLOCK=1024)
            except RuntimeError{handler}
            return out
    '''
    for handler, caught in ((":\n                pass", True), (":\n                return x * 1.0", True),
                            (" as e:\n                raise ValueError('kernel failed') from e", False)):
        source = HEADER + KERNEL + textwrap.dedent(body.format(handler=handler))
        assert ("pytorch_fallback" in _rules(source)) is caught, handler


def test_syntax_errors_are_left_to_the_worker_and_policy_is_validated():
    assert not check_source("def broken(:\n").violations
    with pytest.raises(ValueError, match="policy"):
        check_source("", policy="lenient")


def _repo_candidates() -> list[Path]:
    """Every file in the repository that defines ``class ModelNew`` (honest candidates), cheats excluded."""
    found = []
    for root in ("src", "tests", "benchmarks", "examples"):
        base = REPO / root
        if not base.is_dir():
            continue
        for path in base.rglob("*.py"):
            if ADVERSARIAL in path.parents or path.name.startswith("test_") or "tools/_" in path.as_posix():
                continue
            try:
                tree = ast.parse(path.read_text())
            except (SyntaxError, UnicodeDecodeError):
                continue
            if any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
                found.append(path)
    return found


def test_no_false_rejections_on_the_repository_candidates():
    paths = _repo_candidates()
    assert example_path("softmax_triton.py") in paths
    for path in paths:
        report = check_source(path.read_text(), policy="hybrid")
        assert not report.violations, (path, [v.message for v in report.violations])
