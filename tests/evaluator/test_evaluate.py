"""The evaluator on the CPU interpreter: every status, with a message the model can act on."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from tritonsmith.core.problem import ProblemError
from tritonsmith.evaluator._evaluate import CPU_TIMING_NOTE, evaluate
from tritonsmith.core.results import EvalResult, EvalStatus

HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"


def _with_forward(candidate: str, body: str) -> str:
    """The correct softmax candidate with extra statements at the top of forward."""
    marker = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    assert marker in candidate
    return candidate.replace(marker, marker + textwrap.indent(textwrap.dedent(body), " " * 8))


def test_correct_candidate_passes_without_timing(softmax_reference, softmax_candidate):
    result = evaluate(softmax_reference, softmax_candidate, device="cpu", trials=3)
    assert result.status is EvalStatus.CORRECT, result.feedback()
    assert result.correctness is not None and result.correctness.passed == 3
    assert result.correctness.max_abs_error < 1e-5
    assert result.benchmark is None and result.timing_note == CPU_TIMING_NOTE
    assert "timing needs a CUDA GPU" in result.feedback()


def test_wrong_output_reports_where_and_how_much(softmax_reference, softmax_candidate):
    bad = softmax_candidate.replace("out = num / tl.sum(num, axis=0)", "out = num / (tl.sum(num, axis=0) + 1.0)")
    result = evaluate(softmax_reference, bad, device="cpu", trials=2)
    assert result.status is EvalStatus.WRONG_OUTPUT
    m = result.correctness.mismatch
    assert m.trial == 1 and m.mismatched > 0 and m.total == 129 * 1000
    assert m.first_bad_index is not None and len(m.first_bad_index) == 2
    assert m.max_abs_error > 1e-4
    assert "first bad index" in result.feedback()


def test_shape_mismatch_is_named(softmax_reference, softmax_candidate):
    bad = _with_forward(softmax_candidate, "return softmax(x)[:, :-1]\n")
    result = evaluate(softmax_reference, bad, device="cpu", trials=1)
    assert result.status is EvalStatus.WRONG_OUTPUT
    assert "shape (129, 999)" in result.message and "(129, 1000)" in result.message


def test_nan_output_is_counted(softmax_reference, softmax_candidate):
    bad = _with_forward(softmax_candidate, "return softmax(x) * float('nan')\n")
    result = evaluate(softmax_reference, bad, device="cpu", trials=1)
    assert result.status is EvalStatus.WRONG_OUTPUT
    assert result.correctness.mismatch.nan_count == 129 * 1000


def test_syntax_error_points_at_candidate_line(softmax_reference):
    result = evaluate(softmax_reference, HEADER + "class ModelNew(nn.Module):\n    def forward(self, x)\n", device="cpu")
    assert result.status is EvalStatus.COMPILE_ERROR
    assert "SyntaxError" in result.error and "candidate line 6" in result.error


def test_kernel_error_points_at_candidate_line(softmax_reference, softmax_candidate):
    bad = softmax_candidate.replace("x = x - tl.max(x, axis=0)", "x = x - tl.maximum_of_everything(x)")
    result = evaluate(softmax_reference, bad, device="cpu", trials=1)
    assert result.status in (EvalStatus.COMPILE_ERROR, EvalStatus.RUNTIME_ERROR)
    assert "maximum_of_everything" in result.error
    assert "candidate line" in result.error


def test_missing_modelnew_is_a_compile_error(softmax_reference):
    result = evaluate(softmax_reference, HEADER + "class Model2(nn.Module):\n    pass\n", device="cpu")
    assert result.status is EvalStatus.COMPILE_ERROR
    assert "defines no class ModelNew" in result.message


def test_runtime_error_in_forward(softmax_reference, softmax_candidate):
    bad = _with_forward(softmax_candidate, "raise RuntimeError('boom from the candidate')\n")
    result = evaluate(softmax_reference, bad, device="cpu", trials=1)
    assert result.status is EvalStatus.RUNTIME_ERROR
    assert "boom from the candidate" in result.error and "in forward" in result.error


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("import ctypes\nctypes.string_at(0)\n", "SIGSEGV"),
        ("import os\nos._exit(0)\n", "exit code 0"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "SIGKILL"),
    ],
    ids=["segfault", "os_exit", "sigkill"],
)
def test_crashes_are_contained(softmax_reference, softmax_candidate, body, reason):
    result = evaluate(softmax_reference, _with_forward(softmax_candidate, body), device="cpu", trials=1)
    assert result.status is EvalStatus.CRASHED
    assert reason in result.message and "trial 1" in result.message


def test_out_of_memory_is_a_runtime_error(softmax_reference, softmax_candidate):
    bad = _with_forward(softmax_candidate, "torch.empty(1 << 60, dtype=torch.uint8)\n")
    result = evaluate(softmax_reference, bad, device="cpu", trials=1)
    assert result.status is EvalStatus.RUNTIME_ERROR


def test_hang_times_out_and_kills_children(softmax_reference, softmax_candidate, tmp_path):
    pid_file = tmp_path / "child.pid"
    body = f"""
    import subprocess, sys
    subprocess.Popen([sys.executable, "-c", "import os, time, pathlib; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(120)"])
    while True:
        pass
    """
    start = time.perf_counter()
    result = evaluate(softmax_reference, _with_forward(softmax_candidate, body), device="cpu", trials=1, timeout_s=12)
    assert result.status is EvalStatus.TIMEOUT
    assert result.stage == "trial 1/1"
    assert time.perf_counter() - start < 30
    assert pid_file.exists(), "the candidate's child never started"
    assert not _alive(int(pid_file.read_text())), "a child of the hung worker survived the timeout"


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for a reaper counts as dead)."""
    try:
        status = open(f"/proc/{pid}/status").read()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_hung_kernel_times_out(softmax_reference, softmax_candidate):
    bad = softmax_candidate.replace("row = tl.program_id(0)", "row = tl.program_id(0)\n    while row >= 0:\n        row = row + 0")
    result = evaluate(softmax_reference, bad, device="cpu", trials=1, timeout_s=12)
    assert result.status is EvalStatus.TIMEOUT


def test_next_evaluation_works_after_a_crash(softmax_reference, softmax_candidate):
    crashed = evaluate(softmax_reference, _with_forward(softmax_candidate, "import os\nos.abort()\n"), device="cpu", trials=1)
    assert crashed.status is EvalStatus.CRASHED
    assert evaluate(softmax_reference, softmax_candidate, device="cpu", trials=1).ok


def test_malformed_problem_file_raises_clearly(tmp_path, softmax_candidate):
    bad = tmp_path / "bad_problem.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    with pytest.raises(ProblemError, match="missing: get_inputs, get_init_inputs"):
        evaluate(bad, softmax_candidate, device="cpu")


def test_reference_constructor_failure_raises(tmp_path, softmax_candidate, softmax_reference):
    src = softmax_reference.read_text().replace("super().__init__()", "super().__init__()\n        raise ValueError('bad init')")
    with pytest.raises(ProblemError, match="bad init"):
        evaluate(src, softmax_candidate, device="cpu", trials=1)


def test_result_round_trips_through_json(softmax_reference, softmax_candidate):
    bad = softmax_candidate.replace("out = num / tl.sum(num, axis=0)", "out = num * 2.0 / tl.sum(num, axis=0)")
    result = evaluate(softmax_reference, bad, device="cpu", trials=1)
    again = EvalResult.from_dict(result.to_dict())
    assert again == result


def test_bad_arguments_are_errors(softmax_reference, softmax_candidate):
    with pytest.raises(ValueError, match="tolerance"):
        evaluate(softmax_reference, softmax_candidate, device="cpu", tolerance="loose")
    with pytest.raises(ValueError, match="trials"):
        evaluate(softmax_reference, softmax_candidate, device="cpu", trials=0)


CONSTANT_GROUPNORM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.gn = nn.GroupNorm(channels, channels)  # groups of one value: the output is 0 plus rounding noise

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(19, 37)]


def get_init_inputs():
    return [37]
'''


def test_an_exact_kernel_for_a_constant_output_is_not_called_input_blind(tmp_path):
    """The reference's outputs differ between trials only by rounding; an exact kernel returns the same
    zeros every time. That is not a candidate ignoring its inputs (a scaled-down KernelBench GEMM+GroupNorm
    problem was rejected this way)."""
    from tritonsmith.agents.base import GenerationRequest
    from tritonsmith.agents.builtin import BuiltinGenerator
    from tritonsmith.core.problem import Problem

    problem = Problem.from_source(CONSTANT_GROUPNORM, name="constant_groupnorm")
    candidate = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert candidate.source is not None, candidate.note
    result = evaluate(problem, candidate.source, device="cpu", trials=3)
    assert result.status is EvalStatus.CORRECT, result.feedback()


def test_prestart_worker_starts_the_cuda_zygote_without_a_cuda_call_where_a_device_node_exists(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh machine's first CUDA call takes seconds: the zygote's imports must not wait for it."""
    from tritonsmith.evaluator import _evaluate as evaluate

    started: list[str] = []
    monkeypatch.setattr(evaluate, "prestart", lambda device, env: started.append(device))

    def no_cuda_call(device: str) -> str:
        raise AssertionError("resolve_device called")

    monkeypatch.setattr(evaluate, "_gpu_likely", lambda: True)
    monkeypatch.setattr(evaluate, "resolve_device", no_cuda_call)
    evaluate.prestart_worker("auto")
    evaluate.prestart_worker("cuda")
    assert started == ["cuda", "cuda"]
    monkeypatch.setattr(evaluate, "_gpu_likely", lambda: False)  # no node: resolve as before
    monkeypatch.setattr(evaluate, "resolve_device", lambda device: "cpu")
    evaluate.prestart_worker("auto")
    assert started == ["cuda", "cuda", "cpu"]


def test_gpu_likely_honours_an_empty_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    from tritonsmith.evaluator._evaluate import _gpu_likely

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _gpu_likely() is False
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert _gpu_likely() is False
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert _gpu_likely() is Path("/dev/nvidiactl").exists()


def test_worker_environment_survives_inductor_naming_its_cache_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor sets TORCHINDUCTOR_CACHE_DIR in os.environ on first use; the worker environment (the
    zygote's key) must not change then, or the zygote started early is thrown away and started again."""
    from torch._inductor.runtime import cache_dir_utils

    from tritonsmith.evaluator._evaluate import _worker_env

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    before = {dev: _worker_env(dev) for dev in ("cpu", "cuda")}
    cache_dir_utils.cache_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.path.abspath(cache_dir_utils.default_cache_dir())
    assert {dev: _worker_env(dev) for dev in ("cpu", "cuda")} == before


def test_the_default_worker_timeout_grows_with_the_candidates_kernel_count():
    """A whole network's candidate (DenseNet201: 109 kernel groups) needs more than 300 s cold on a GPU."""
    from tritonsmith.evaluator._evaluate import default_timeout_s

    one = "@triton.jit\ndef _k(x):\n    pass\n"
    assert default_timeout_s("cuda", one) == 300.0
    assert default_timeout_s("cpu", one * 30) == 600.0
    assert default_timeout_s("cuda", one * 110) == 300.0 + 3.0 * 80
    assert default_timeout_s("cuda", one * 1000) == 900.0


CANCELLING_REFERENCE = HEADER + '''

class Model(nn.Module):
    def forward(self, x):
        return (x + 1e8) - 1e8  # float32 keeps multiples of 8 only: up to 4 from the float64 answer, x


def get_inputs():
    return [torch.randn(37, 129)]


def get_init_inputs():
    return []
'''

EXACT_IDENTITY = HEADER + '''

@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


def test_a_failure_against_an_ill_conditioned_reference_says_so(tmp_path, softmax_reference, softmax_candidate):
    """The kernel computes the exact answer; the reference's own float32 rounding is far beyond the tolerance
    (24_EfficientNetB2: BatchNorm over two values per channel). Still wrong_output (KernelBench's rule), but the
    feedback names the cause; an ordinary wrong kernel gets no such line."""
    ref, cand = tmp_path / "cancel.py", tmp_path / "cancel_triton.py"
    ref.write_text(CANCELLING_REFERENCE)
    cand.write_text(EXACT_IDENTITY)
    result = evaluate(ref, cand, device="cpu", trials=2)
    assert result.status is EvalStatus.WRONG_OUTPUT
    pattern = result.correctness.mismatch.pattern
    assert 1.0 < pattern["reference_vs_float64"] <= 4.0
    assert "the reference is ill-conditioned on these inputs" in result.feedback()
    # the message alone is what suite records, reports and the CLI line carry
    assert "the reference is ill-conditioned here" in result.message and "from its float64 result" in result.message
    bad = softmax_candidate.replace("out = num / tl.sum(num, axis=0)", "out = num / (tl.sum(num, axis=0) + 1.0)")
    ordinary = evaluate(softmax_reference, bad, device="cpu", trials=2)
    assert ordinary.status is EvalStatus.WRONG_OUTPUT and "ill-conditioned" not in ordinary.feedback()
    assert "ill-conditioned" not in ordinary.message
    assert "reference_vs_float64" not in (ordinary.correctness.mismatch.pattern or {})


FLOAT32_CONSTANT_REFERENCE = HEADER + '''

class Model(nn.Module):
    def forward(self, x):
        # a float32 tensor made in forward: the float64 copy of this model cannot multiply by it
        return (x @ torch.eye(x.shape[-1])) * 2.0


def get_inputs():
    return [torch.randn(37, 29)]


def get_init_inputs():
    return []
'''


def test_a_wrong_kernel_against_a_reference_without_a_float64_copy_is_wrong_output_not_a_crash(tmp_path):
    """The ill-conditioning diagnosis runs the reference in float64; where that raises (a float32 tensor made in
    forward, as an LSTM's random initial state), the verdict stands without it instead of the worker dying."""
    ref, cand = tmp_path / "eye.py", tmp_path / "eye_triton.py"
    ref.write_text(FLOAT32_CONSTANT_REFERENCE)
    cand.write_text(EXACT_IDENTITY)  # x, not 2x
    result = evaluate(ref, cand, device="cpu", trials=2)
    assert result.status is EvalStatus.WRONG_OUTPUT, result.message
    assert "ill-conditioned" not in result.message


def test_the_numerics_tolerance_judges_against_float64(tmp_path, softmax_reference, softmax_candidate):
    """``--tolerance numerics`` (float64, relative to the reference's own error): an honest kernel passes, a
    wrong one fails, and the exact kernel an ill-conditioned reference fails under ``kernelbench`` passes
    (the policy crashed the worker on float32 outputs until 2026-12-06: isclose of float32 with float64)."""
    good = evaluate(softmax_reference, softmax_candidate, device="cpu", trials=2, tolerance="numerics")
    assert good.status is EvalStatus.CORRECT, good.feedback()
    bad = softmax_candidate.replace("out = num / tl.sum(num, axis=0)", "out = num / (tl.sum(num, axis=0) + 1.0)")
    wrong = evaluate(softmax_reference, bad, device="cpu", trials=2, tolerance="numerics")
    assert wrong.status is EvalStatus.WRONG_OUTPUT, wrong.feedback()
    ref, cand = tmp_path / "cancel.py", tmp_path / "cancel_triton.py"
    ref.write_text(CANCELLING_REFERENCE)
    cand.write_text(EXACT_IDENTITY)
    exact = evaluate(ref, cand, device="cpu", trials=2, tolerance="numerics")
    assert exact.status is EvalStatus.CORRECT, exact.feedback()
