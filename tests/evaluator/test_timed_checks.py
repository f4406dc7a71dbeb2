"""CPU-testable parts of the checks on timed calls (``_timed_checks``): sampled output comparison,
reuse of earlier outputs, the stream census of a profiled call, the light floor and the median's CI."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from tritonsmith.evaluator import _timed_checks as tc
from tritonsmith.evaluator._errors import CandidateFailure


def test_sampled_comparison_passes_rounding_and_fails_another_inputs_result():
    g = torch.Generator().manual_seed(11)
    r = torch.randn(301, 77, generator=g)
    assert tc.sample_agrees(r + 1e-5 * torch.randn(301, 77, generator=g), r)
    other = torch.randn(301, 77, generator=g)  # the answer for other inputs: a memoised result
    assert not tc.sample_agrees(other, r)
    assert not tc.sample_agrees(r[:, :-1], r)
    assert not tc.sample_agrees(r.double(), r)
    ints = torch.randint(0, 9, (513,), generator=g)
    assert tc.sample_agrees(ints.clone(), ints)
    assert not tc.sample_agrees((ints + 1) % 9, ints)


def test_sampled_comparison_is_scale_aware_for_small_outputs():
    """A 4099-wide softmax is ~2e-4 everywhere: an absolute tolerance would take any such tensor for it.

    The memoised answer for other inputs (seen on the H200 on 2026-12-04, passing a 1e-2 absolute bound)
    must be wrong; the honest answer with rounding, and an output that is rounding noise around zero
    (no meaningful relative error, every element within the kernelbench tolerance), must agree.
    """
    g = torch.Generator().manual_seed(5)
    r = torch.softmax(torch.randn(37, 4099, generator=g), dim=1)
    stale = torch.softmax(torch.randn(37, 4099, generator=g), dim=1)
    assert not tc.sample_agrees(stale, r)
    assert not tc.sample_agrees(torch.zeros_like(r), r)
    assert tc.sample_agrees(r * (1 + 1e-6 * torch.randn(37, 4099, generator=g)), r)
    noise = 1e-7 * torch.randn(301, 77, generator=g)  # e.g. the mean of a normalized tensor
    assert tc.sample_agrees(1e-7 * torch.randn(301, 77, generator=g), noise)
    with_nan = r.clone()
    with_nan[:, 0] = float("nan")
    assert tc.sample_agrees(with_nan.clone(), with_nan)
    assert not tc.sample_agrees(torch.nan_to_num(with_nan, nan=0.5) * 0 + float("nan"), r)


def test_round_checker_names_memoised_calls():
    g = torch.Generator().manual_seed(3)
    checker = tc.RoundChecker()
    outs = [torch.randn(40, 33, generator=g) for _ in range(4)]
    checker.compare(outs[0].clone(), outs[0])
    checker.compare(outs[0].clone(), outs[1])  # the first call's answer returned for the second's inputs
    checker.compare([outs[2]], [outs[2], outs[3]])  # one output short
    checker.compare(outs[3] * (1 + 1e-6), outs[3])
    with pytest.raises(CandidateFailure) as info:
        checker.verdict()
    assert info.value.rule == "benchmark_output_wrong"
    assert "2 of 4 timed calls" in info.value.message and "call 2" in info.value.message


def test_round_checker_rejects_an_output_sharing_memory_with_a_held_one():
    checker = tc.RoundChecker()
    store = torch.randn(7, 5)
    checker.check_reuse(torch.randn(7, 5))
    checker.check_reuse(store)
    checker.check_reuse(torch.randn(7, 5))
    with pytest.raises(CandidateFailure) as info:
        checker.check_reuse(store[1:])  # a view of the output returned two calls ago, still held
    assert info.value.rule == "output_reused"


@dataclass
class _Event:
    n: str
    stream: int
    start: int
    dur: int
    kind: str = "DeviceType.CUDA"

    def name(self) -> str:
        return self.n

    def device_type(self) -> str:
        return self.kind

    def device_resource_id(self) -> int:
        return self.stream

    def start_ns(self) -> int:
        return self.start

    def duration_ns(self) -> int:
        return self.dur


def test_work_on_a_librarys_internal_streams_counts_only_where_the_reference_ran_it_there_too():
    """cuDNN runs some grouped convolutions on its own streams (H200 2026-12-06: ShuffleNet was rejected)."""
    spin, home = _Event("void at::cuda::spin_kernel(long)", 7, 0, 10), _Event("_shuffle_kernel", 7, 20, 30)
    grouped = [_Event("void implicit_convolve_sgemm<float, float, 1024>", 13, 60 + i, 5) for i in range(3)]
    reference = tc.stream_census([spin, *grouped], "spin_kernel", set())
    honest = tc.stream_census([spin, home, *grouped], "spin_kernel", {"_shuffle_kernel"})
    assert len(honest.foreign) == 3
    kept = tc.without_library_streams(honest, reference)
    assert kept.foreign == () and kept.triton_share == honest.triton_share
    tc.check_streams(kept)
    own_stream = tc.stream_census([spin, home, _Event("void implicit_convolve_sgemm<float, float, 1024>", 21, 60, 5),
                                   _Event("_shuffle_kernel", 13, 70, 30)], "spin_kernel", {"_shuffle_kernel"})
    kept = tc.without_library_streams(own_stream, reference)
    assert len(kept.foreign) == 2  # the same library kernel on the candidate's stream, its own kernel on 13
    with pytest.raises(CandidateFailure):
        tc.check_streams(kept)


def test_a_channels_last_candidates_library_kernels_on_the_references_library_streams_are_not_side_stream_work():
    """H100 2026-12-06: 26_ShuffleNet's channels-last variant was rejected: cuDNN ran its NHWC kernels on the
    internal stream where the reference's NCHW kernels ran; the match was by kernel name and stream."""
    spin, home = _Event("void at::cuda::spin_kernel(long)", 7, 0, 10), _Event("_bn_relu_kernel", 7, 20, 30)
    reference = tc.stream_census([spin, _Event("void implicit_convolve_sgemm<float, float, 1024>", 13, 40, 5)],
                                 "spin_kernel", set())
    nhwc = [_Event("void convolve_common_engine_float_NHWC<float, float, 1024, 5>", 13, 60 + 9 * i, 5)
            for i in range(4)]
    candidate = tc.stream_census([spin, home, *nhwc], "spin_kernel", {"_bn_relu_kernel"})
    assert len(candidate.foreign) == 4 and candidate.foreign_streams == (13,) * 4
    kept = tc.without_library_streams(candidate, reference)
    assert kept.foreign == () and kept.foreign_streams == () and kept.foreign_triton == ()
    tc.check_streams(kept)
    # a side stream PyTorch gave the candidate (id 21) and the candidate's own kernel on 13 stay foreign
    cheat = tc.stream_census([spin, home, nhwc[0], _Event("void convolve_common_engine_float_NHWC", 21, 99, 5),
                              _Event("_bn_relu_kernel", 13, 120, 30)], "spin_kernel", {"_bn_relu_kernel"})
    kept = tc.without_library_streams(cheat, reference)
    assert kept.foreign_streams == (21, 13) and kept.foreign_triton == (False, True)
    with pytest.raises(CandidateFailure):
        tc.check_streams(kept)
    assert tc.without_library_streams(cheat, tc.stream_census([spin], "spin_kernel", set())).foreign == cheat.foreign


def test_library_work_still_running_when_the_call_returned_stays_foreign():
    """A library call on an unjoined side stream runs on the library's internal streams too, joined back only to
    that side stream: the caller's end marker starts before it ends, so the timer would not have covered it."""
    spin, home = _Event("void at::cuda::spin_kernel(long)", 7, 0, 10), _Event("_bn_relu_kernel", 7, 20, 30)
    reference = tc.stream_census([spin, _Event("void implicit_convolve_sgemm<float, float, 1024>", 13, 40, 5)],
                                 "spin_kernel", set())
    end = _Event("void at::cuda::spin_kernel(long)", 7, 60, 1)
    joined = _Event("void convolve_common_engine_float_NHWC", 13, 30, 25)  # ends at 55, before the end marker
    unjoined = _Event("void convolve_common_engine_float_NHWC", 13, 55, 9_000)  # ends at 9055, long after
    honest = tc.stream_census([spin, home, joined, end], "spin_kernel", {"_bn_relu_kernel"})
    assert honest.foreign_late == (False,) and honest.streams == (7, 13)  # the end marker is not the candidate's
    tc.check_streams(tc.without_library_streams(honest, reference))
    cheat = tc.stream_census([spin, home, joined, unjoined, end], "spin_kernel", {"_bn_relu_kernel"})
    kept = tc.without_library_streams(cheat, reference)
    assert cheat.foreign_late == (False, True) and kept.foreign_late == (True,) and len(kept.foreign) == 1
    with pytest.raises(CandidateFailure):
        tc.check_streams(kept)


def test_stream_census_finds_work_on_another_stream_and_the_triton_share():
    honest = [_Event("void at::cuda::spin_kernel(long)", 7, 0, 10), _Event("_softmax_kernel", 7, 20, 300),
              _Event("void cudnn::conv(...)", 7, 400, 900), _Event("cudaLaunchKernel", 1, 5, 3, "DeviceType.CPU")]
    census = tc.stream_census(honest, "spin_kernel", {"_softmax_kernel"})
    assert census.foreign == () and census.streams == (7,)
    assert census.triton_share == pytest.approx(300 / 1200)
    tc.check_streams(census)
    cheat = honest + [_Event("_softmax_kernel", 13, 25, 300), _Event("Memcpy DtoD (Device -> Device)", 21, 30, 5)]
    census = tc.stream_census(cheat, "spin_kernel", {"_softmax_kernel"})
    assert len(census.foreign) == 2 and "stream 13" in census.foreign[0]
    with pytest.raises(CandidateFailure) as info:
        tc.check_streams(census)
    assert info.value.rule == "side_stream" and "1 more" in info.value.message
    with pytest.raises(tc.CensusUnavailable):
        tc.stream_census(honest[1:], "spin_kernel", set())  # no marker: nothing was recorded


def test_light_floor_counts_inputs_and_outputs_once():
    x, y = torch.randn(1000, 250), torch.randn(250)
    floor = tc.light_floor_ms([x, 3, y], [torch.empty(1000)], bandwidth_gbs=1000.0)
    assert floor == pytest.approx((1000 * 250 + 250 + 1000) * 4 / 1e12 * 1e3)
    assert tc.light_floor_ms([x], [], None) is None


def test_median_ci_brackets_the_median_and_narrows_with_more_samples():
    g = torch.Generator().manual_seed(0)
    small = [float(v) for v in torch.randn(20, generator=g)]
    large = [float(v) for v in torch.randn(2000, generator=g)]
    for xs in (small, large):
        lo, hi = tc.median_ci(xs)
        med = sorted(xs)[len(xs) // 2]
        assert lo <= med <= hi
    assert tc.median_ci(large)[1] - tc.median_ci(large)[0] < tc.median_ci(small)[1] - tc.median_ci(small)[0]


def test_round_checker_judges_all_rounds_together_and_names_the_wrong_ones():
    """Samples are gathered per round and judged at the end: a memoised answer in round 37 of 60 is found."""
    g = torch.Generator().manual_seed(17)
    checker = tc.RoundChecker()
    answers = [torch.softmax(torch.randn(29, 4099, generator=g), dim=1) for _ in range(60)]
    for i, want in enumerate(answers):
        got = answers[i - 3].clone() if i == 36 else want * (1 + 1e-6 * torch.randn(want.shape, generator=g))
        checker.compare([got, torch.arange(i, i + 5)], [want, torch.arange(i, i + 5)])
    with pytest.raises(CandidateFailure) as info:
        checker.verdict()
    assert "1 of 60 timed calls" in info.value.message and "call 37" in info.value.message
    honest = tc.RoundChecker()
    for want in answers[:9]:
        honest.compare(want.clone(), want)
    honest.verdict()  # nothing wrong: no exception


def test_a_tf32_spread_found_in_the_trials_widens_the_timed_bound_but_not_past_another_inputs_result():
    """MobileNetV2 with TF32 emulated on the CPU: the candidate's and the reference's convolutions end ~4% apart
    normwise (7% from the exact answer each); here 8% apart, within 4x a 3.6% spread."""
    assert tc.wrong_bound() == tc.wrong_bound(0.001) == 0.05
    assert tc.wrong_bound(0.036) == pytest.approx(0.144)
    assert tc.wrong_bound(1.0) == 0.3
    g = torch.Generator().manual_seed(23)
    wants = [torch.randn(10, 1000, generator=g) for _ in range(6)]
    tf32_apart = [w + 0.08 * torch.randn(w.shape, generator=g) for w in wants]
    strict, widened = tc.RoundChecker(), tc.RoundChecker(tc.wrong_bound(0.036))
    for got, want in zip(tf32_apart, wants, strict=True):
        strict.compare(got, want)
        widened.compare(got, want)
    with pytest.raises(CandidateFailure):
        strict.verdict()
    widened.verdict()  # within 4x the spread: no exception
    stale = tc.RoundChecker(tc.wrong_bound(1.0))
    for i, want in enumerate(wants):
        stale.compare(wants[i - 1].clone(), want)  # another input's result: ~1.4 normwise
    with pytest.raises(CandidateFailure):
        stale.verdict()
