"""CPU-testable parts of the CUDA timing: the timed-output check and the warm-up policy."""

from __future__ import annotations

import pytest
import torch

from tritonsmith.evaluator import _bench
from tritonsmith.evaluator._errors import CandidateFailure


def _reference_error(c: torch.Tensor, r: torch.Tensor) -> float:
    return float((c.double() - r.double()).norm()) / float(r.double().norm())


@pytest.mark.parametrize("shape", [(37,), (5, 129), (3, 7, 11)])
def test_chunked_relative_error_matches_a_float64_norm(shape, monkeypatch):
    monkeypatch.setattr(_bench, "_VERIFY_CHUNK", 17)  # many chunks, the last one partial
    g = torch.Generator().manual_seed(len(shape))
    r = torch.randn(shape, generator=g)
    c = r + 1e-3 * torch.randn(shape, generator=g)
    assert _bench._relative_error(c, r) == pytest.approx(_reference_error(c, r), rel=1e-12)
    assert _bench._relative_error(c.t() if c.dim() == 2 else c, r.t() if r.dim() == 2 else r) == pytest.approx(
        _reference_error(c, r), rel=1e-12)


def test_relative_error_refuses_nan_and_another_dtype():
    r = torch.randn(9, 31)
    c = r.clone()
    c[4, 7] = float("nan")
    assert not _bench._relative_error(c, r) <= 1.0
    assert _bench._relative_error(r.double(), r) == float("inf")


def test_timed_outputs_must_be_the_references(monkeypatch):
    monkeypatch.setattr(_bench, "_VERIFY_CHUNK", 64)
    r = torch.randn(13, 29)
    expected = [[r]]
    _bench._verify_timed_outputs({0: r + 1e-4 * torch.randn(13, 29)}, expected)  # an honest kernel's rounding
    for bad in (r * 1.1, torch.full_like(r, float("nan")), r[:, :-1], r.double(), [r, r]):
        with pytest.raises(CandidateFailure) as info:
            _bench._verify_timed_outputs({0: bad}, expected)
        assert info.value.rule == "benchmark_output_wrong"


def test_timed_output_that_is_rounding_noise_around_a_constant_passes(monkeypatch):
    """The mean of a group-normalized tensor is 0 up to rounding: relative error means nothing there."""
    monkeypatch.setattr(_bench, "_VERIFY_CHUNK", 64)
    torch.manual_seed(3)
    r = 1e-8 * torch.randn(127)
    _bench._verify_timed_outputs({0: 1e-8 * torch.randn(127)}, [[r]])
    for bad in (r + 1e-3, torch.full_like(r, float("nan")), r.double()):
        with pytest.raises(CandidateFailure) as info:
            _bench._verify_timed_outputs({0: bad}, [[r]])
        assert info.value.rule == "benchmark_output_wrong"


def test_warm_up_stops_once_50_ms_are_spent(monkeypatch):
    monkeypatch.setattr(_bench, "_synchronize", lambda: None)
    clock = iter(float(t) for t in range(0, 10_000))
    monkeypatch.setattr(_bench, "_perf_counter", lambda: next(clock) * 0.03)  # each call "takes" 30 ms
    calls: list[int] = []
    _bench._warm_up(lambda args: calls.append(args[0]), [[0], [1], [2], [3]])
    assert calls == [0, 1]  # 30 ms after the first, 60 ms after the second: stop
    fast = iter(float(t) for t in range(0, 10_000))
    monkeypatch.setattr(_bench, "_perf_counter", lambda: next(fast) * 1e-4)
    calls.clear()
    _bench._warm_up(lambda args: calls.append(args[0]), [[0], [1], [2], [3]])
    assert calls == [0, 1, 2]  # short kernels: one call per input set, at most three
