"""Checks on the calls the evaluator times (CUDA): every timed call must be a computed call.

* :class:`RoundChecker` — before every timed round the evaluator writes fresh inputs into the same
  buffers (same ``data_ptr``, new contents), so no output can come from memory. After the round it
  compares a random sample of the candidate's output with the eager reference's output for the same
  contents, and checks that the output shares no memory with earlier outputs the caller still holds.
* :func:`stream_census` — one timed round is profiled (CUPTI through the torch profiler): every kernel,
  copy and fill the candidate caused must run on the caller's current stream, however the stream was
  obtained (``torch.cuda.Stream``, an indirection, cupy, ctypes). It also measures the share of the
  candidate's GPU time spent in its own Triton kernels.
* :func:`light_floor_ms` — the physical floor of a timed call: reading every input and writing every
  output once at the GPU's peak bandwidth. Weights are excluded (an algebraic rewrite may pre-reduce
  them), so the floor holds for any honest algorithm.

Each finding raises through :func:`tritonsmith.evaluator._guards.reject` with its rule.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch

from tritonsmith.core.problem_meta import flatten_outputs
from tritonsmith.evaluator._compare import kernelbench_tolerance
from tritonsmith.evaluator._guards import reject, shares_memory

log = logging.getLogger(__name__)

_SAMPLE = 2048  # elements compared per output per timed call
# A sampled float output is wrong when it is far from the reference normwise (relative error above
# _WRONG_REL_ERROR: a recycled or another input's result is ~1, an honest kernel ~1e-6) *and* some element
# lies outside _SLACK times the kernelbench tolerance. The second condition keeps honest outputs that are
# rounding noise around a constant (no meaningful relative error); an absolute tolerance alone would accept
# any output of small magnitude (a 4096-wide softmax is ~2e-4 everywhere).
_WRONG_REL_ERROR = 0.05
# Where the trials found the candidate's TF32 library calls and the reference's apart by a spread (a deep
# network, ``_trials._against_strict_fp32``), the bound is that many times the spread, never above the cap:
# another input's result stays ~1 or more away.
_SPREAD_MULTIPLE = 4.0
_WRONG_REL_ERROR_CAP = 0.3
_SLACK = 4.0
_WRONG_SHARE = 0.25  # integer outputs: wrong when more than this share of the sample differs
_HELD_OUTPUTS = 2  # earlier candidate outputs kept alive (as a caller would) while the next one is made


def wrong_bound(tf32_spread: float = 0.0, floor: float = _WRONG_REL_ERROR) -> float:
    """The normwise relative error above which a timed output is wrong: ``floor`` (the sampled check's by
    default, see ``_rows_wrong``), raised to the spread the trials accepted between the candidate's TF32
    library calls and the reference's, never above the cap."""
    return max(floor, min(_WRONG_REL_ERROR_CAP, _SPREAD_MULTIPLE * tf32_spread))


class RoundChecker:
    """Per-round checks of the candidate's timed outputs (see the module docstring).

    A round costs three small device operations (draw sample indices, gather the candidate's and the
    reference's elements there); the samples of all rounds are judged together in :meth:`verdict`, so the
    timed loop neither synchronizes nor runs a comparison per round.
    """

    def __init__(self, wrong_rel_error: float = _WRONG_REL_ERROR) -> None:
        self.wrong_rel_error = wrong_rel_error
        self.rounds = 0
        self._structural: list[int] = []  # rounds whose outputs differ in number, shape, dtype or device
        self._samples: dict[int, list[tuple[int, torch.Tensor, torch.Tensor]]] = {}  # output -> (round, got, want)
        self._held: list[list[torch.Tensor]] = []

    def check_reuse(self, cand_out: Any) -> None:
        """An output overlapping an output of an earlier call that the caller still holds is reuse."""
        tensors = [t for t in flatten_outputs(cand_out) if isinstance(t, torch.Tensor)]
        earlier = [t for held in self._held for t in held]
        for i, t in enumerate(tensors):
            if earlier and shares_memory(t, earlier):
                raise reject("output_reused", "benchmark", f"output {i} of a timed call shares memory with the output "
                             "of an earlier call that the caller still holds: allocate each call's output inside "
                             "forward (a cached or recycled result is not a computed one)")
        self._held = (self._held + [tensors])[-_HELD_OUTPUTS:]

    def compare(self, cand_out: Any, ref_out: Any) -> None:
        """Sample one timed call's outputs and the reference's for the same inputs (judged in :meth:`verdict`)."""
        self.rounds += 1
        got, want = flatten_outputs(cand_out), flatten_outputs(ref_out)
        if len(got) != len(want):
            self._structural.append(self.rounds)
            return
        pairs = [(j, c, r) for j, (c, r) in enumerate(zip(got, want, strict=True)) if isinstance(r, torch.Tensor)]
        if any(_mismatched(c, r) for _, c, r in pairs):
            self._structural.append(self.rounds)
            return
        for j, c, r in pairs:
            if r.numel():
                self._samples.setdefault(j, []).append((self.rounds, *_gather(c, r)))

    def verdict(self) -> None:
        wrong = set(self._structural)
        for samples in self._samples.values():
            # judged on the host: a few hundred kilobytes, and no device kernel the evaluation would load only for this
            got, want = torch.stack([g for _, g, _ in samples]).cpu(), torch.stack([w for _, _, w in samples]).cpu()
            rows = _rows_wrong(got, want, self.wrong_rel_error)
            wrong.update(n for (n, _, _), bad in zip(samples, rows.tolist(), strict=True) if bad)
        self._structural.clear()
        self._samples.clear()
        if wrong:
            first = min(wrong)
            raise reject("benchmark_output_wrong", "benchmark", (
                f"{len(wrong)} of {self.rounds} timed calls returned outputs that differ from the reference's "
                f"for the inputs they were given (first: call {first}); fresh inputs are written into the "
                "same buffers before every timed call, so ModelNew must compute every call from its inputs "
                "(no cached or memoised results, no behaviour that changes when timed)"))

    def release(self) -> None:
        self._held.clear()


def _mismatched(c: Any, r: torch.Tensor) -> bool:
    return not isinstance(c, torch.Tensor) or c.shape != r.shape or c.dtype != r.dtype or c.device != r.device


def _gather(c: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same random ``_SAMPLE`` elements of ``c`` and ``r`` (all of them when fewer), on their device."""
    flat_c, flat_r = c.reshape(-1), r.reshape(-1)
    if r.numel() > _SAMPLE:
        idx = torch.randint(0, r.numel(), (_SAMPLE,), device=r.device)
        return flat_c[idx], flat_r[idx]
    return flat_c.clone(), flat_r.clone()


def _rows_wrong(c: torch.Tensor, r: torch.Tensor, bound: float = _WRONG_REL_ERROR) -> torch.Tensor:
    """Which rows of the samples ``c`` (got) and ``r`` (want), both ``[rounds, elements]``, are wrong.

    Floats: relative error ``||c - r|| / ||r||`` above ``bound`` and some element outside
    ``_SLACK`` times the kernelbench tolerance (a NaN where the reference has a number is wrong; NaN in
    both agrees). Integers: more than ``_WRONG_SHARE`` of the elements differ.
    """
    if not (r.is_floating_point() or r.is_complex()):
        return (c != r).float().mean(dim=1) > _WRONG_SHARE
    wide = torch.complex128 if r.is_complex() else torch.float64
    c64, r64 = c.to(wide), r.to(wide)
    both_nan = torch.isnan(c64) & torch.isnan(r64)
    diff = torch.where(both_nan, torch.zeros_like(c64), c64 - r64).abs()
    diff = torch.nan_to_num(diff, nan=float("inf"))
    scale = torch.nan_to_num(r64.abs(), nan=0.0, posinf=0.0)
    rel = diff.square().sum(dim=1).sqrt() / scale.square().sum(dim=1).sqrt().clamp_min(1e-300)
    tol = _SLACK * kernelbench_tolerance(r.dtype)
    outside = (diff > tol * (1.0 + scale)).any(dim=1)
    return (rel > bound) & outside


def sample_wrong(c: Any, r: torch.Tensor) -> bool:
    """Whether ``c`` is not the reference ``r`` on a random sample of elements (see ``_rows_wrong``);
    True on a structural mismatch (shape, dtype, device, not a tensor)."""
    if _mismatched(c, r):
        return True
    if r.numel() == 0:
        return False
    got, want = _gather(c, r)
    return bool(_rows_wrong(got[None], want[None])[0])


def sample_agrees(c: Any, r: torch.Tensor) -> bool:
    """Whether a random sample of ``c`` agrees with ``r`` (the negation of :func:`sample_wrong`)."""
    return not sample_wrong(c, r)


class CensusUnavailable(RuntimeError):
    """The profiler recorded no GPU activity (no CUPTI, or profiling not permitted)."""


@dataclass(frozen=True)
class StreamCensus:
    """What one profiled call of the candidate ran on the GPU."""

    streams: tuple[int, ...]  # stream ids of the candidate's GPU activities
    foreign: tuple[str, ...]  # activities on a stream other than the caller's
    triton_share: float | None  # share of kernel time in the candidate's own Triton kernels
    # per entry of ``foreign``: its stream id, whether it is one of the candidate's own Triton kernels, and
    # whether it was still running when the caller's stream reached the end marker (work nothing joined back)
    foreign_streams: tuple[int, ...] = ()
    foreign_triton: tuple[bool, ...] = ()
    foreign_late: tuple[bool, ...] = ()


# CUPTI timestamps of a kernel and of the one that waited for it may touch; a microsecond is no escaped work
_JOIN_SLACK_NS = 1_000


def stream_census(events: Iterable[Any], marker_name: str, triton_names: set[str]) -> StreamCensus:
    """Read CUPTI activities of one profiled call.

    ``events`` are torch's Kineto events (``name()``, ``device_type()``, ``device_resource_id()``,
    ``start_ns()``, ``duration_ns()``). The caller's stream is the stream of the marker kernel (``marker_name``) the
    evaluator launched on its current stream inside the profiled window, just before the call; a second marker on
    that stream, launched when the call returned, starts only once the caller's stream has done everything the call
    put on it (library work joined back included), so foreign work that ends after it started escaped the call.
    """
    gpu = sorted((e for e in events if _is_gpu(e)), key=lambda e: e.start_ns())
    marker = [e for e in gpu if marker_name in e.name()]
    if not marker:
        raise CensusUnavailable(f"the profile holds no {marker_name!r} marker kernel")
    home = marker[0].device_resource_id()
    end = [e for e in marker[1:] if e.device_resource_id() == home][-1:]
    ends_at = end[0].start_ns() if end else None
    mine = [e for e in gpu if e is not marker[0] and not (end and e is end[0])]
    away = [e for e in mine if e.device_resource_id() != home]
    kernels = [e for e in mine if _is_kernel(e)]
    total = sum(e.duration_ns() for e in kernels)
    own = sum(e.duration_ns() for e in kernels if _is_triton(e, triton_names))
    share = own / total if total > 0 else None
    late_after = None if ends_at is None else ends_at + _JOIN_SLACK_NS
    return StreamCensus(streams=tuple(sorted({e.device_resource_id() for e in mine})),
                        foreign=tuple(f"{e.name()[:60]} (stream {e.device_resource_id()})" for e in away),
                        triton_share=share, foreign_streams=tuple(e.device_resource_id() for e in away),
                        foreign_triton=tuple(_is_triton(e, triton_names) for e in away),
                        foreign_late=tuple(late_after is not None and e.start_ns() + e.duration_ns() > late_after
                                           for e in away))


def _is_triton(e: Any, triton_names: set[str]) -> bool:
    return any(_triton_match(e.name(), n) for n in triton_names)


def _is_gpu(e: Any) -> bool:
    return str(e.device_type()).rsplit(".", 1)[-1] == "CUDA"


def _is_kernel(e: Any) -> bool:
    name = e.name()
    return not name.startswith(("Memcpy", "Memset", "[memory]"))


def _triton_match(kernel: str, name: str) -> bool:
    """Triton names a kernel after its function, sometimes with a suffix (``_add_kernel_0d1d2``)."""
    return kernel == name or kernel.startswith(name + "_") or kernel.startswith(name + "(")


def profile_call(fn: Any, triton_names: set[str]) -> StreamCensus:
    """Profile a marker kernel then ``fn()`` on the GPU and take the census of what ran.

    The marker (``torch.cuda._sleep``, a spin kernel no candidate launches by accident) runs on the
    evaluator's current stream: its stream id is the caller's.
    """
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        caller = torch.cuda.current_stream()
        torch.cuda._sleep(1000)
        out = fn()
        with torch.cuda.stream(caller):  # where the timer's end event would be recorded, whatever fn left current
            torch.cuda._sleep(1)
        torch.cuda.synchronize()
    del out
    results = getattr(prof.profiler, "kineto_results", None) if prof.profiler else None
    return stream_census(results.events() if results else [], _MARKER_KERNEL, triton_names)


_MARKER_KERNEL = "spin_kernel"


def without_library_streams(census: StreamCensus, reference: StreamCensus) -> StreamCensus:
    """``census`` less its library work on the streams where the reference's own call also ran library work.

    cuDNN runs some grouped convolutions on its own internal streams and joins them back to the caller's
    (H200 2026-12-06: ShuffleNet's ``implicit_convolve_sgemm``, stream 13): PyTorch does that in the
    reference too, on the same handle's streams. Matched by stream, not by kernel: for a channels-last
    candidate cuDNN picks its NHWC kernels on those same streams (H100 2026-12-06: 26_ShuffleNet's
    ``net-cl`` was rejected when both had to match). A candidate's own side stream is a stream PyTorch gave
    it, which the reference's library calls never use, so its work stays foreign; so does any of the
    candidate's Triton kernels, whatever its stream, and library work still running when the caller's stream
    reached the end marker (a library call made on an unjoined side stream, whose internal streams are joined
    back to that side stream only).
    """
    library = set(reference.foreign_streams)
    late = census.foreign_late or (False,) * len(census.foreign)
    keep = [i for i, (stream, triton, after) in enumerate(zip(census.foreign_streams, census.foreign_triton, late,
                                                               strict=True))
            if triton or after or stream not in library]
    return replace(census, foreign=tuple(census.foreign[i] for i in keep),
                   foreign_streams=tuple(census.foreign_streams[i] for i in keep),
                   foreign_triton=tuple(census.foreign_triton[i] for i in keep),
                   foreign_late=tuple(late[i] for i in keep))


def check_streams(census: StreamCensus) -> None:
    if census.foreign:
        raise reject("side_stream", "benchmark", (
            f"the candidate ran GPU work on a stream other than the caller's current stream ({census.foreign[0]}"
            f"{f' and {len(census.foreign) - 1} more' if len(census.foreign) > 1 else ''}): work there escapes "
            "the timer; launch everything on the current stream"))


def light_floor_ms(inputs: list[Any], outputs: list[Any], bandwidth_gbs: float | None) -> float | None:
    """Milliseconds to read every input tensor and write every output once at ``bandwidth_gbs``."""
    if not bandwidth_gbs:
        return None
    nbytes = sum(t.numel() * t.element_size() for t in (*inputs, *outputs) if isinstance(t, torch.Tensor))
    return nbytes / (bandwidth_gbs * 1e9) * 1e3


def peak_bandwidth_gbs() -> float | None:
    """The highest bandwidth the current GPU could have: its datasheet figure or its memory interface's."""
    from tritonsmith.core.device import datasheet_bandwidth_gbs

    sheet = datasheet_bandwidth_gbs(torch.cuda.get_device_name())
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_khz = getattr(props, "memory_clock_rate", 0) or 0
    bus_bits = getattr(props, "memory_bus_width", 0) or 0
    interface = 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9 if clock_khz and bus_bits else 0.0
    best = max(sheet or 0.0, interface)
    return best or None


def median_ci(samples: list[float]) -> tuple[float, float]:
    """A distribution-free 95% confidence interval of the median (order statistics)."""
    xs = sorted(samples)
    n = len(xs)
    if n < 6:
        return xs[0], xs[-1]
    k = max(0, int(math.floor(n / 2 - 0.98 * math.sqrt(n))))
    return xs[k], xs[n - 1 - k]
