"""The evaluator on a CUDA GPU: faults, hangs, timing, and the cheats only a GPU can show.

Run on the GPU machine: ``python -m pytest -q -m gpu tests/evaluator/test_evaluate_gpu.py``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from tritonsmith.examples import example_path
import tritonsmith.evaluator._evaluate as evaluate_module
from tritonsmith.evaluator._checks import StaticReport
from tritonsmith.core.results import EvalStatus
from tritonsmith.evaluator._evaluate import evaluate

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ADVERSARIAL = Path(__file__).parent / "adversarial"
BIG_SOFTMAX = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(4099, 4096)]


def get_init_inputs():
    return []
'''


def _with_forward(candidate: str, body: str) -> str:
    marker = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    assert marker in candidate
    return candidate.replace(marker, marker + textwrap.indent(textwrap.dedent(body), " " * 8))


@pytest.fixture
def big_softmax(tmp_path) -> Path:
    path = tmp_path / "big_softmax.py"
    path.write_text(BIG_SOFTMAX)
    return path


def test_correct_candidate_is_timed_with_speedups(softmax_reference, softmax_candidate):
    result = evaluate(softmax_reference, softmax_candidate, device="cuda", trials=3, compile_mode="default")
    assert result.ok, result.feedback()
    b = result.benchmark
    assert b is not None and b.candidate.median_ms > 0 and b.eager.median_ms > 0
    assert b.candidate.host_median_ms is not None and b.candidate.host_median_ms >= b.candidate.median_ms * 0.5
    assert result.speedup_vs_eager is not None and result.speedup_vs_eager > 0
    assert result.checks is not None and result.checks.kernel_launches == 1 and not result.checks.violations


def test_illegal_memory_access_is_contained(softmax_reference, softmax_candidate):
    bad = softmax_candidate.replace("x_ptr + row * x_row_stride + cols", "x_ptr + row * x_row_stride + cols + (1 << 40)")
    result = evaluate(softmax_reference, bad, device="cuda", trials=1)
    assert result.status in (EvalStatus.RUNTIME_ERROR, EvalStatus.CRASHED), result.feedback()
    assert evaluate(softmax_reference, softmax_candidate, device="cuda", trials=1, benchmark=False).ok


def test_gpu_out_of_memory_is_a_runtime_error(softmax_reference, softmax_candidate):
    bad = _with_forward(softmax_candidate, "torch.empty(1 << 50, dtype=torch.uint8, device=x.device)\n")
    result = evaluate(softmax_reference, bad, device="cuda", trials=1)
    assert result.status is EvalStatus.RUNTIME_ERROR
    assert "OutOfMemory" in (result.error or "") or "out of memory" in (result.error or "")


def test_hung_gpu_kernel_times_out(softmax_reference, softmax_candidate):
    # A loop with no side effects may be deleted by LLVM (it was, on the H200 on 2026-12-02): spin on a
    # volatile load instead, which the compiler must keep re-reading.
    spin = ("row = tl.program_id(0)\n    probe = tl.load(x_ptr, volatile=True)\n"
            "    while probe == probe:\n        probe = tl.load(x_ptr, volatile=True)")
    bad = softmax_candidate.replace("row = tl.program_id(0)", spin)
    assert bad != softmax_candidate
    result = evaluate(softmax_reference, bad, device="cuda", trials=1, timeout_s=30)
    assert result.status is EvalStatus.TIMEOUT


def test_stream_injection_is_rejected(softmax_reference):
    result = evaluate(softmax_reference, ADVERSARIAL / "stream_injection.py", device="cuda", trials=2)
    assert result.status is EvalStatus.REJECTED and result.rule == "cuda_stream"


def test_hidden_stream_past_static_checks_is_caught_by_timing(big_softmax, monkeypatch):
    monkeypatch.setattr(evaluate_module, "check_source", lambda *a, **k: StaticReport())
    result = evaluate(big_softmax, ADVERSARIAL / "hidden_stream.py", device="cuda", trials=2, compile_mode="none")
    assert result.status is EvalStatus.REJECTED, result.feedback()
    assert result.rule in ("hidden_work", "cuda_stream", "side_stream"), result.feedback()


HONEST_SOFTMAX = example_path("softmax_triton.py")  # the bundled hand-written softmax: honest
# cheat -> rules it may be rejected with (issue 17: memoisation and side streams, direct and indirect)
TIMED_CHEATS = {
    "memo_data_ptr": {"benchmark_output_wrong", "output_reused"},
    "memo_same_tensor": {"output_reused", "benchmark_output_wrong"},
    "memo_indirect": {"benchmark_output_wrong", "output_reused"},
    "side_stream_getattr": {"side_stream"},
    "side_stream_set": {"side_stream"},
    "side_stream_when_timed": {"side_stream"},
    "side_stream_torch_op": {"side_stream"},
}


@pytest.mark.parametrize("name", sorted(TIMED_CHEATS))
def test_timed_cheats_are_rejected_with_their_rule(big_softmax, name):
    result = evaluate(big_softmax, ADVERSARIAL / f"{name}.py", device="cuda", trials=3)
    assert result.status is EvalStatus.REJECTED, result.feedback()
    assert result.rule in TIMED_CHEATS[name], result.feedback()
    assert result.benchmark is None


def test_version_keyed_memo_gains_nothing_over_the_honest_kernel(big_softmax):
    """In-place refills bump the version counter: the issue's memo never hits, so it is timed computing."""
    honest = evaluate(big_softmax, HONEST_SOFTMAX, device="cuda", trials=3)
    memo = evaluate(big_softmax, ADVERSARIAL / "memo_version.py", device="cuda", trials=3)
    assert honest.ok, honest.feedback()
    # either outcome keeps the promise: rejected, or correct at no more than the honest kernel's speed
    assert memo.status in (EvalStatus.REJECTED, EvalStatus.CORRECT), memo.feedback()
    assert memo.status is EvalStatus.REJECTED or memo.speedup_vs_eager <= 1.15 * honest.speedup_vs_eager, (
        memo.feedback(), honest.feedback())


@pytest.mark.parametrize("name", ["decorative_silu_bias", "decorative_indirection", "decorative_overwrite"])
def test_decorative_kernels_are_rejected_on_the_gpu(tmp_path, name):
    problem = tmp_path / "silu_bias.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                       "    def __init__(self, f):\n        super().__init__()\n        self.bias = nn.Parameter(torch.randn(f))\n\n"
                       "    def forward(self, x):\n        return torch.nn.functional.silu(x) + self.bias\n\n\n"
                       "def get_inputs():\n    return [torch.randn(64, 128, 1021)]\n\n\ndef get_init_inputs():\n    return [1021]\n")
    result = evaluate(problem, ADVERSARIAL / f"{name}.py", device="cuda", trials=3)
    assert result.status is EvalStatus.REJECTED and result.rule == "decorative_kernel", result.feedback()
    honest = evaluate(problem, Path(__file__).parent / "honest" / "hybrid_silu_bias.py", device="cuda", trials=3)
    assert honest.ok, honest.feedback()
    assert honest.checks.triton_share is not None and 0.0 < honest.checks.triton_share < 1.0


def test_honest_kernel_reports_interval_floor_and_triton_share(big_softmax):
    result = evaluate(big_softmax, HONEST_SOFTMAX, device="cuda", trials=3)
    assert result.ok, result.feedback()
    b = result.benchmark
    assert b.light_floor_ms is not None and 0 < b.light_floor_ms < b.candidate.median_ms
    lo, hi = b.speedup_ci_vs_eager
    assert lo <= b.speedup_vs_eager <= hi
    assert b.candidate.launch_ms is not None and b.candidate.ci_low_ms <= b.candidate.median_ms
    assert result.checks.triton_share == pytest.approx(1.0, abs=0.02)


def test_candidate_that_stops_computing_while_timed_is_rejected(big_softmax):
    result = evaluate(big_softmax, ADVERSARIAL / "benchmark_switch.py", device="cuda", trials=5, compile_mode="none")
    assert result.status is EvalStatus.REJECTED, result.feedback()
    assert result.rule == "benchmark_output_wrong"


def test_background_thread_is_not_correct(softmax_reference, monkeypatch):
    monkeypatch.setattr(evaluate_module, "check_source", lambda *a, **k: StaticReport())
    result = evaluate(softmax_reference, ADVERSARIAL / "background_thread.py", device="cuda", trials=3)
    assert result.status is not EvalStatus.CORRECT, result.feedback()
    assert result.status in (EvalStatus.REJECTED, EvalStatus.WRONG_OUTPUT)


@pytest.mark.parametrize("name", ["tf32_dot", "tf32_default_dot"])
def test_tf32_dot_is_rejected_on_the_gpu_by_the_float64_check(name, tmp_path, monkeypatch):
    """Without the static hint, the float64 comparison still sees tf32's error on a float32 matmul, whether the
    dot asks for tf32 or says nothing (Triton's default on float32 operands): the CPU's verdict on both."""
    monkeypatch.setattr(evaluate_module, "check_source", lambda *a, **k: StaticReport())
    problem = tmp_path / "matmul.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, a, b):\n"
                       "        return a @ b\n\n\ndef get_inputs():\n    return [torch.randn(256, 64) * 0.1, "
                       "torch.randn(64, 192) * 0.1]\n\n\ndef get_init_inputs():\n    return []\n")
    result = evaluate(problem, ADVERSARIAL / f"{name}.py", device="cuda", trials=2, benchmark=False)
    assert result.status in (EvalStatus.REJECTED, EvalStatus.WRONG_OUTPUT), result.feedback()
    if result.status is EvalStatus.REJECTED:
        assert result.rule == "precision_lowered"


def test_the_same_dot_in_tf32x3_is_correct_on_the_gpu(tmp_path):
    """The counterpart of the test above: three tf32 passes keep fp32 accuracy on real tensor cores, so the
    static check's pass for ``input_precision="tf32x3"`` is not a loophole (a wider K than the CPU test's)."""
    problem = tmp_path / "matmul.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, a, b):\n"
                       "        return a @ b\n\n\ndef get_inputs():\n    return [torch.randn(257, 1031), "
                       "torch.randn(1031, 191)]\n\n\ndef get_init_inputs():\n    return []\n")
    result = evaluate(problem, Path(__file__).parent / "honest" / "matmul_tf32x3.py", device="cuda", trials=3,
                      benchmark=False)
    assert result.ok, result.feedback()


@pytest.mark.parametrize("name", ["stale_buffer", "output_cache", "persistent_output", "input_mutated",
                                  "lower_precision", "timer_monkeypatch", "global_tf32_flag", "forge_result"])
def test_cpu_cheats_are_caught_on_the_gpu_too(softmax_reference, name):
    result = evaluate(softmax_reference, ADVERSARIAL / f"{name}.py", device="cuda", trials=2, compile_mode="none")
    assert result.status in (EvalStatus.REJECTED, EvalStatus.WRONG_OUTPUT), result.feedback()


def test_hybrid_conv_epilogue_is_timed(tmp_path):
    problem = tmp_path / "conv_relu.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                       "    def __init__(self, cin, cout, k):\n        super().__init__()\n"
                       "        self.conv = nn.Conv2d(cin, cout, k)\n\n    def forward(self, x):\n"
                       "        return torch.relu(self.conv(x))\n\n\ndef get_inputs():\n"
                       "    return [torch.randn(8, 16, 65, 63)]\n\n\ndef get_init_inputs():\n    return [16, 32, 3]\n")
    result = evaluate(problem, ADVERSARIAL / "hybrid_conv_relu.py", device="cuda", trials=2, compile_mode="none")
    assert result.ok, result.feedback()
    assert result.benchmark is not None
    assert any(op.op == "conv2d" for op in result.checks.torch_ops)


CONV_64 = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 48, 3)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(5, 64, 29, 37)]


def get_init_inputs():
    return []
'''


def _builtin_default(tmp_path, name: str, source: str, *, kind: str | None = None, key: str | None = None):
    """The built-in generator's first variant (or variant ``key``) for a reference source: (reference path,
    candidate path)."""
    from tritonsmith.agents.builtin import _plan
    from tritonsmith.agents.builtin._emit import emit_module
    from tritonsmith.agents.builtin._variants import variant_menu
    from tritonsmith.core.problem import Problem

    ref = tmp_path / f"{name}.py"
    ref.write_text(source)
    problem = Problem.from_file(ref)
    _, plan = _plan(problem, {}, None)
    menu = variant_menu(plan)
    variant = menu[0] if key is None else next(v for v in menu if v.key == key)
    traced, vplan = _plan(problem, variant.options, None)
    if kind is not None:
        assert any(g.kind == kind for g in vplan.groups), [g.kind for g in vplan.groups]
    cand = tmp_path / f"{name}_triton.py"
    cand.write_text(emit_module(problem.name, problem.source, traced, vplan, variant.overrides, variant.key))
    return ref, cand


def test_an_exact_fp32_triton_convolution_is_not_failed_by_cudnns_tf32_reference(tmp_path):
    """cuDNN runs the reference's convolution in TF32 by default (~5e-4 off the fp32 answer, beyond 1e-4): the
    built-in generator's implicit-GEMM kernel (tf32x3, fp32-accurate) must still be correct, judged against
    the reference in full fp32 (H100 2026-12-05: 12 of 14 dev convolutions were failed before this)."""
    ref, cand = _builtin_default(tmp_path, "conv64", CONV_64, kind="conv")
    assert torch.backends.cudnn.allow_tf32  # PyTorch's default, which the evaluator keeps for the reference
    result = evaluate(ref, cand, device="cuda", trials=3)
    assert result.status is EvalStatus.CORRECT, result.feedback()


DEEP_HYBRID = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        layers = []
        for cin in (24, 40, 40, 40, 40, 40, 40, 40):
            layers += [nn.Conv2d(cin, 40, 3, padding=1, bias=False), nn.BatchNorm2d(40), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)

    def forward(self, x):
        # the feature map itself (277k values): a pooled head averaged the TF32 differences away (H200
        # 2026-12-06: six layers and a head passed without the second opinion, so it tested nothing)
        return self.features(x)


def get_inputs():
    return [torch.randn(6, 24, 33, 35)]


def get_init_inputs():
    return []
'''


def test_a_deep_hybrid_network_is_not_failed_by_tf32_rounding_on_both_sides(tmp_path):
    """Level 3's conv + BatchNorm networks (H100 2026-12-05: ResNet block, DenseNet, MobileNets, EfficientNet
    all wrong_output at 2e-4..1e-2): the candidate's cuDNN convolutions run in TF32 as the reference's do, on
    inputs that its fused Triton BatchNorm rounded differently, and six layers amplify the difference."""
    ref, cand = _builtin_default(tmp_path, "deep_hybrid", DEEP_HYBRID)
    result = evaluate(ref, cand, device="cuda", trials=3)
    assert result.status is EvalStatus.CORRECT, result.feedback()
    assert any("full float32" in n for n in result.checks.notes), result.checks.notes


GROUPED_1X1 = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(240, 120, kernel_size=1, groups=3, bias=False)
        self.bn = nn.BatchNorm2d(120)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(10, 240, 223, 225)]


def get_init_inputs():
    return []
'''


def test_a_grouped_convolution_on_cudnns_own_streams_is_not_side_stream_work(tmp_path):
    """cuDNN may run a grouped convolution's groups on its internal streams, in the reference too (H200
    2026-12-06: 25_ShuffleNetUnit's hybrid candidates were rejected as side-stream work)."""
    ref, cand = _builtin_default(tmp_path, "grouped_1x1", GROUPED_1X1)
    result = evaluate(ref, cand, device="cuda", trials=2)
    assert result.status is EvalStatus.CORRECT, result.feedback()


SHUFFLE_PAIR = GROUPED_1X1.replace(
    "        self.bn = nn.BatchNorm2d(120)\n",
    "        self.bn = nn.BatchNorm2d(120)\n        self.conv2 = nn.Conv2d(120, 240, kernel_size=1, groups=3, bias=False)\n"
    "        self.bn2 = nn.BatchNorm2d(240)\n",
).replace("return F.relu(self.bn(self.conv(x)))", "return self.bn2(self.conv2(F.relu(self.bn(self.conv(x)))))")


def test_a_channels_last_networks_grouped_convolutions_on_cudnns_own_streams_are_not_side_stream_work(tmp_path):
    """H100 2026-12-06: 26_ShuffleNet's net-cl variant was rejected: cuDNN ran its NHWC grouped kernels on the
    internal stream where the reference's NCHW ones ran, and the census matched kernel names too."""
    ref, cand = _builtin_default(tmp_path, "shuffle_pair", SHUFFLE_PAIR, key="net-cl")
    assert "channels_last" in cand.read_text()
    result = evaluate(ref, cand, device="cuda", trials=2)
    assert result.status is EvalStatus.CORRECT, result.feedback()
