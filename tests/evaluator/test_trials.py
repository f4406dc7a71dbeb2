"""The decorative-kernel criterion (``_trials._reproduces``): what the output looks like without kernels."""

from __future__ import annotations

import pytest
import torch

from tritonsmith.evaluator._trials import _reproduces


def test_an_output_torch_computed_alone_reproduces_the_reference():
    g = torch.Generator().manual_seed(2)
    ref, other = torch.randn(37, 41, generator=g), torch.randn(37, 41, generator=g)
    assert _reproduces(ref.clone(), ref, other) is True
    assert _reproduces(ref * (1 + 1e-6), ref, other) is True


def test_unwritten_or_stale_outputs_do_not_reproduce_it():
    g = torch.Generator().manual_seed(4)
    # a softmax over many columns: every value ~1/n, far inside kernelbench's atol of 1e-4
    ref = torch.softmax(torch.randn(5, 40000, generator=g), dim=1)
    other = torch.softmax(torch.randn(5, 40000, generator=g), dim=1)
    assert _reproduces(torch.zeros_like(ref), ref, other) is False  # fresh memory: zeros
    assert _reproduces(other.clone(), ref, other) is False  # stale memory: another input's answer
    assert _reproduces(torch.full_like(ref, float("nan")), ref, other) is False
    assert _reproduces(ref[:, :-1], ref, other) is False


def test_outputs_that_do_not_depend_on_the_inputs_give_no_signal():
    const = torch.full((9, 3), 0.5)
    assert _reproduces(const.clone(), const, const + 1e-9) is None
    ints = torch.arange(11)
    assert _reproduces(ints.clone(), ints, ints.clone()) is None
    assert _reproduces(ints.clone(), ints, ints.flip(0)) is True


def test_memory_allocated_in_the_check_is_poisoned_and_the_mode_restored():
    from tritonsmith.evaluator._trials import uninitialized_memory_poisoned

    before = (torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory)
    stale = torch.rand(13, 257)
    del stale  # a freed block holding values, as a staging copy leaves behind
    with uninitialized_memory_poisoned():
        assert torch.empty(13, 257).isnan().all()
        assert torch.empty_like(torch.ones(3, 5, dtype=torch.float64)).isnan().all()
        assert (torch.empty(7, dtype=torch.int32) == torch.iinfo(torch.int32).max).all()
    assert (torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory) == before


RELU_ON_RAND = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    # torch.rand: every value >= 0, so the answer is the inputs' own values; the staging copies freed
    # on return leave blocks that hold exactly that answer
    a = torch.rand(9, 1001)
    b = a.clone()
    return [b.clone()]


def get_init_inputs():
    return []
'''


def test_an_honest_kernel_whose_answer_equals_its_input_is_not_called_decorative(tmp_path):
    """Issue 17's open lead (19_ReLU, 32_HardTanh on rand inputs): never a ``decorative_kernel`` rejection."""
    from pathlib import Path

    from tritonsmith.core.results import EvalStatus
    from tritonsmith.evaluator._evaluate import evaluate

    problem = tmp_path / "relu_rand.py"
    problem.write_text(RELU_ON_RAND)
    relu = Path(__file__).parents[2] / "benchmarks" / "candidates" / "relu.py"
    result = evaluate(problem, relu, device="cpu", trials=3)
    assert result.status is EvalStatus.CORRECT, result.feedback()


def test_strict_fp32_turns_tf32_off_and_restores_the_flags():
    from tritonsmith.evaluator._trials import strict_fp32, tf32_allowed

    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        assert tf32_allowed("cuda") and not tf32_allowed("cpu")
        with strict_fp32():
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
            assert not tf32_allowed("cuda")
        assert torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _tf32_like(x: torch.Tensor) -> torch.Tensor:
    """What a library op does to its float32 operands while TF32 is allowed: 10 mantissa bits (emulated)."""
    if not torch.backends.cudnn.allow_tf32:
        return x
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


class _LibraryChain(torch.nn.Module):
    """Three 'library' matmuls (TF32 emulated) with a nonlinearity between; ``wobble`` perturbs the input of
    each by ~1e-5 relative, as the rounding of fused Triton kernels between library calls does after a few
    layers: far inside the tolerance in float32, but it flips TF32's rounding of some operands."""

    def __init__(self, w: torch.Tensor, wobble: bool, wrong_when_strict: bool = False,
                 off_when_tf32: float = 0.0, exact: bool = False) -> None:
        super().__init__()
        self.w, self.wobble, self.wrong_when_strict, self.off_when_tf32 = w, wobble, wrong_when_strict, off_when_tf32
        self.exact = exact  # its own (Triton-like) matmuls: float32 whatever the TF32 flags say

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rounded = (lambda t: t) if self.exact else _tf32_like
        for _ in range(3):
            if self.wobble:
                x = x * (1 + 2.0 ** -17)
            x = torch.tanh(rounded(x) @ rounded(self.w))
        if self.wrong_when_strict and not torch.backends.cudnn.allow_tf32:
            x = x + 1.0
        if torch.backends.cudnn.allow_tf32:
            x = x * (1 + self.off_when_tf32)
        return x


class _Guards:
    def __init__(self, ops: list[str]) -> None:
        from collections import Counter

        self.enabled, self.cand_ops, self.notes, self.tf32_spread = True, Counter(ops), [], 0.0


class _Job:
    def __init__(self, ops: list[str]) -> None:
        self.spec = {"tolerance": "kernelbench", "problem_name": "chain"}
        self.device, self.candidate_path, self.guards = "cpu", None, _Guards(ops)


def _second_opinion(cand_model: torch.nn.Module, ops: list[str]) -> tuple[dict | None, list[str], float]:
    from tritonsmith.core.problem_meta import flatten_outputs
    from tritonsmith.evaluator._trials import _against_strict_fp32, _check_outputs

    g = torch.Generator().manual_seed(11)
    w = torch.randn(97, 97, generator=g) / 97 ** 0.5
    x = torch.randn(33, 97, generator=g)
    ref_model = _LibraryChain(w, wobble=False)
    cand_model.w = w
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        ref_out = flatten_outputs(ref_model(x.clone()))
        cand_out = flatten_outputs(cand_model(x.clone()))
        job = _Job(ops)
        first, a, r = _check_outputs(0, cand_out, ref_out, None, "kernelbench")
        assert first is not None and first["kind"] == "values"  # the emulated TF32 alone fails it
        verdict, _, _ = _against_strict_fp32(job, 0, (ref_model, cand_model), lambda: [x.clone()],
                                             (cand_out, ref_out, None), first, (a, r))
        assert torch.backends.cudnn.allow_tf32  # restored
        return verdict, job.guards.notes, job.guards.tf32_spread
    finally:
        torch.backends.cudnn.allow_tf32 = saved


def test_a_hybrid_candidate_whose_library_calls_ran_in_tf32_is_judged_with_both_sides_in_fp32():
    verdict, notes, spread = _second_opinion(_LibraryChain(torch.empty(0), wobble=True), ["matmul", "tanh"])
    assert verdict is None
    assert any("both sides in full float32" in n for n in notes)
    assert 1e-6 < spread < 1e-2  # what the timed checks then allow for (``_timed_checks.wrong_bound``)


def test_an_exact_candidate_judged_against_the_fp32_reference_records_its_distance_from_the_tf32_one():
    """The timed rounds compare with the reference as run (TF32): they must allow what the trials accepted
    (H200 2026-12-06: MobileNetV2 passed its trials, then was rejected while timed)."""
    verdict, notes, spread = _second_opinion(_LibraryChain(torch.empty(0), wobble=False, exact=True), ["tanh"])
    assert verdict is None
    assert any("against the reference run in full float32" in n for n in notes)
    assert 1e-6 < spread < 1e-2


def test_the_fp32_second_opinion_keeps_a_candidate_that_is_wrong_in_fp32_failed():
    verdict, notes, spread = _second_opinion(_LibraryChain(torch.empty(0), wobble=True, wrong_when_strict=True),
                                     ["matmul", "tanh"])
    assert verdict is not None and verdict["kind"] == "values" and notes == []


def test_a_candidate_without_library_ops_is_not_rerun_in_fp32():
    """Its own arithmetic is Triton's, which TF32 flags do not change: only the first comparison counts."""
    verdict, notes, spread = _second_opinion(_LibraryChain(torch.empty(0), wobble=True), ["tanh"])
    assert verdict is not None and notes == []


def test_a_candidate_right_only_when_tf32_is_off_stays_failed():
    """3% off while the flags are as timed: further from the exact answer than TF32 explains (the reference's
    own TF32 error here is ~1e-4 normwise), though exact with them off."""
    verdict, notes, spread = _second_opinion(_LibraryChain(torch.empty(0), wobble=True, off_when_tf32=0.03),
                                     ["matmul", "tanh"])
    assert verdict is not None and notes == []
    verdict, notes, spread = _second_opinion(_LibraryChain(torch.empty(0), wobble=True, off_when_tf32=0.002),
                                     ["matmul", "tanh"])
    assert verdict is None  # within the loose bound: the fp32 rerun decides, and it agrees


def test_large_reference_outputs_are_remembered_by_a_sample(monkeypatch):
    from tritonsmith.evaluator import _trials

    monkeypatch.setattr(_trials, "_REMEMBER_WHOLE_BYTES", 1000)
    monkeypatch.setattr(_trials, "_SAMPLE_ELEMENTS", 50)
    g = torch.Generator().manual_seed(11)
    small, large = torch.randn(7, generator=g), torch.randn(33, 29, generator=g)
    kept = _trials._remember([small, large, 3])
    assert kept[0] is small and kept[2] == 3
    assert isinstance(kept[1], _trials._Sampled) and 40 <= kept[1].values.numel() <= 50
    # the next trial's reference: the same values are close, others (even on the sample alone) are not
    assert _trials._all_close([small, large.clone(), 3], kept)
    assert not _trials._all_close([small, large + 1.0, 3], kept)
    assert not _trials._all_close([small, large.t().contiguous(), 3], kept)  # another shape
    below = _trials._remember([small])
    assert below[0] is small


def test_the_evaluators_own_out_of_memory_is_reported_not_a_dead_worker():
    from types import SimpleNamespace

    from tritonsmith.evaluator.sandbox import _worker

    try:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
    except torch.OutOfMemoryError as exc:
        assert _worker._out_of_memory(exc)
        result = _worker._memory_result(SimpleNamespace(stage_name="trial 2/5", device="cuda"), exc)
    assert result["status"] == "runtime_error" and result["stage"] == "trial 2/5"
    assert "evaluator's own checks during trial 2/5" in result["message"] and "--scale" in result["message"]
    assert "Tried to allocate 8.00 GiB" in result["error"]
    assert not _worker._out_of_memory(ValueError("not memory"))


class _AlwaysRounded(_LibraryChain):
    """A Triton-like kernel in lower precision: its operands rounded whatever the TF32 flags say."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        saved = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = True
        try:
            return super().forward(x)
        finally:
            torch.backends.cudnn.allow_tf32 = saved


class _FirstTrialJob(_Job):
    def __init__(self, ops: list[str]) -> None:
        from collections import Counter

        super().__init__(ops)
        self.stage_name = "trial 1/5"
        self.guards.policy, self.guards.ref_ops = "hybrid", Counter(ops)


def _first_trial(cand_model: torch.nn.Module, ops: list[str], monkeypatch) -> list[str]:
    """The first trial's float64 precision check where the reference's library calls ran in full float32 (as
    cuDNN's algorithm choice does at some shapes) and PyTorch allows TF32: the notes it left, or raises."""
    from tritonsmith.core.problem_meta import flatten_outputs
    from tritonsmith.evaluator import _trials

    monkeypatch.setattr(_trials, "tf32_allowed", lambda device: True)
    monkeypatch.setattr(_trials.guards, "policy_findings", lambda *a: None)  # the torch policy is not tested here
    g = torch.Generator().manual_seed(5)
    w = torch.randn(97, 97, generator=g) / 97 ** 0.5
    x = torch.randn(33, 97, generator=g)
    ref_model = _LibraryChain(torch.empty(0), wobble=False, exact=True)
    del ref_model.w
    ref_model.register_buffer("w", w)  # the float64 copy (``.double()``) converts buffers
    cand_model.w = w
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        job = _FirstTrialJob(ops)
        ref_out, cand_out = flatten_outputs(ref_model(x.clone())), flatten_outputs(cand_model(x.clone()))
        _trials._check_first_trial(job, (ref_model, cand_model), lambda: [x.clone()], ref_out, cand_out)
        assert torch.backends.cudnn.allow_tf32  # restored
        assert not any("skipped" in n for n in job.guards.notes)
        return job.guards.notes
    finally:
        torch.backends.cudnn.allow_tf32 = saved


def test_the_precision_check_does_not_blame_a_candidate_for_its_torch_calls_running_in_tf32(monkeypatch):
    """H100 2026-12-07, level 2's 90 at batch 64: cuDNN ran the reference's conv3d in full float32 and the
    candidate's (no bias) in TF32: 5.7e-5 from float64 against the reference's 6.6e-8, so precision_lowered."""
    notes = _first_trial(_LibraryChain(torch.empty(0), wobble=False), ["matmul", "tanh"], monkeypatch)
    assert any("ran in TF32" in n and "keep float32 accuracy" in n for n in notes)


def test_the_precision_check_still_rejects_lower_precision_kernels_beside_torch_calls(monkeypatch):
    from tritonsmith.evaluator._errors import CandidateFailure

    with pytest.raises(CandidateFailure) as failure:
        _first_trial(_AlwaysRounded(torch.empty(0), wobble=False), ["matmul", "tanh"], monkeypatch)
    assert failure.value.rule == "precision_lowered"


def test_the_precision_check_does_not_rerun_a_candidate_without_torch_calls(monkeypatch):
    from tritonsmith.evaluator._errors import CandidateFailure

    with pytest.raises(CandidateFailure) as failure:  # its error is its kernels' own: TF32 flags do not change it
        _first_trial(_LibraryChain(torch.empty(0), wobble=False), ["tanh"], monkeypatch)
    assert failure.value.rule == "precision_lowered" and "above what float32 explains" in str(failure.value)
