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


def test_the_full_timed_comparison_allows_the_tf32_spread_the_trials_accepted(monkeypatch):
    """A deep hybrid network's TF32 output is ~3% from the reference's as run; another input's result is ~1."""
    from tritonsmith.evaluator import _timed_checks as tc

    monkeypatch.setattr(_bench, "_VERIFY_CHUNK", 64)
    g = torch.Generator().manual_seed(5)
    r = torch.randn(13, 29, generator=g)
    apart = r + 0.03 * torch.randn(13, 29, generator=g)
    with pytest.raises(CandidateFailure):
        _bench._verify_timed_outputs({0: apart}, [[r]])
    bound = tc.wrong_bound(0.02, _bench._TIMED_OUTPUT_REL_ERROR)
    assert bound == pytest.approx(0.08) and tc.wrong_bound(0.0, _bench._TIMED_OUTPUT_REL_ERROR) == 1e-2
    _bench._verify_timed_outputs({0: apart}, [[r]], bound)
    for bad, spread in ((r * 1.2, 0.02), (torch.zeros_like(r), 1.0), (torch.randn(13, 29, generator=g), 1.0)):
        with pytest.raises(CandidateFailure):  # past the bound, or another input's result even at the cap
            _bench._verify_timed_outputs({0: bad}, [[r]], tc.wrong_bound(spread, _bench._TIMED_OUTPUT_REL_ERROR))


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


class _FakeClock:
    """perf_counter that only moves when a fake call "runs" for ``step_s``."""

    def __init__(self, step_s: float) -> None:
        self.now = 0.0
        self.step_s = step_s

    def __call__(self) -> float:
        return self.now

    def call(self, calls: list[int]):
        def fn(args):
            calls.append(args[0])
            self.now += self.step_s
        return fn


def test_warm_up_stops_once_50_ms_are_spent(monkeypatch):
    monkeypatch.setattr(_bench, "_synchronize", lambda: None)
    slow = _FakeClock(0.03)  # each call "takes" 30 ms
    monkeypatch.setattr(_bench, "_perf_counter", slow)
    calls: list[int] = []
    launch = _bench._warm_up(slow.call(calls), [[0], [1], [2], [3]])
    assert calls == [0, 1]  # 30 ms after the first, 60 ms after the second: stop
    assert launch == pytest.approx(30.0)  # the last call's host time, in ms
    fast = _FakeClock(1e-4)
    monkeypatch.setattr(_bench, "_perf_counter", fast)
    calls.clear()
    _bench._warm_up(fast.call(calls), [[0], [1], [2], [3]])
    assert calls == [0, 1, 2]  # short kernels: one call per input set, at most three


def test_rounds_stop_on_a_tight_confidence_interval_or_the_cap(monkeypatch):
    g = torch.Generator().manual_seed(5)
    steady = {"a": [1.0 + 1e-4 * float(x) for x in torch.randn(40, generator=g)]}
    assert not _bench._done(5, steady, target_ms=0.0, spent_s=0.0)  # below the minimum
    assert _bench._done(40, steady, target_ms=0.0, spent_s=0.0)  # CI width ~1e-4 << 1%
    noisy = {"a": [1.0 + 0.3 * float(x) for x in torch.randn(40, generator=g)]}
    assert not _bench._done(40, noisy, target_ms=0.0, spent_s=0.0)
    assert _bench._done(40, noisy, target_ms=0.0, spent_s=_bench._BUDGET_S + 1)  # the budget ends it
    assert _bench._done(_bench._MAX_REPS, noisy, target_ms=0.0, spent_s=0.0)
    assert not _bench._done(30, steady, target_ms=1e6, spent_s=0.0)  # 150 ms of calls first (long kernels)
    tiny = {"a": [0.0045 + 0.0005 * (i % 2) for i in range(200)]}  # 4.5 us, at the events' resolution
    assert _bench._done(200, tiny, target_ms=0.0, spent_s=0.0)


def test_a_call_the_sleep_did_not_cover_is_timed_again_with_a_longer_sleep(monkeypatch):
    """The GPU left the sleep before the host returned: the events would time Python. Drop and retry."""
    monkeypatch.setattr(_bench, "_cycles_per_ms", lambda: 1000.0)
    seen: list[int] = []

    def fake_one(fn, args, flush, cycles, keep=False):
        seen.append(cycles)
        return float(len(seen)), 2.0, 0.5, "out", len(seen) >= 3

    monkeypatch.setattr(_bench, "_one", fake_one)
    ev, _, _, out, cycles = _bench._covered_call(lambda a: None, [], None, 100, keep=True)
    assert seen == [100, 200, 400] and cycles == 400  # the sleep that covered it
    assert ev == 3.0 and out == "out"  # the covered sample is the one kept
    seen.clear()
    monkeypatch.setattr(_bench, "_one", lambda *a, **k: (seen.append(1) or 1.0, 2.0, 0.5, None, False))
    _bench._covered_call(lambda a: None, [], None, 100, keep=False)
    assert len(seen) == _bench._SLEEP_RETRIES + 1  # bounded: the last sample is kept


def test_timed_rounds_report_where_their_wall_time_went(monkeypatch):
    """The interleaved loop splits its wall time into writing inputs, the checks and the timed calls."""
    import time

    monkeypatch.setattr(_bench, "_warm_up", lambda fn, sets: 0.01)
    monkeypatch.setattr(_bench, "_sleep_cycles", lambda ms: 1)
    monkeypatch.setattr(_bench, "_done", lambda r, events, target, spent: r >= 12)

    def slow_call(fn, args, flush, cycles, keep):
        time.sleep(0.002)
        return 0.01, 0.02, 0.005, fn(args) if keep else None, cycles

    monkeypatch.setattr(_bench, "_covered_call", slow_call)
    costs: dict[str, float] = {}
    timed = _bench._time_interleaved({"a": lambda a: a[0] * 2, "b": lambda a: a[0] + 1}, [[torch.randn(3, 5)]],
                                     None, costs=costs)
    assert timed["a"]["reps"] == 12 and timed["b"]["reps"] == 12
    assert set(costs) == {"inputs", "checks", "calls"}
    assert costs["calls"] >= 12 * 2 * 0.002 and costs["calls"] > costs["checks"] >= 0.0


def test_stage_parts_are_reported_but_not_summed_twice():
    from tritonsmith.evaluator._evaluate import _with_overhead

    stages = {"trial": 1.0, "bench_timed": 2.0, "bench_timed/checks": 0.5, "bench_timed/calls": 1.25}
    out = _with_overhead(stages, wall_s=4.0)
    assert out["process"] == pytest.approx(1.0)  # 4.0 - (1.0 + 2.0): the parts are inside bench_timed
    assert out["bench_timed/checks"] == 0.5 and out["bench_timed/calls"] == 1.25
