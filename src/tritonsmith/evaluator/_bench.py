"""CUDA timing inside the worker: candidate, eager reference and ``torch.compile`` reference.

Every timed round: write fresh inputs into the timed input buffers in place (same ``data_ptr``, new
contents, from a seed the candidate cannot predict), flush L2, synchronize the device, enqueue a short
GPU sleep, record events around the call, synchronize again. The sleep keeps the GPU busy while the
host enqueues the call, so the events measure device execution and not Python launch latency (which
is reported beside it as ``launch_ms``): short kernels get stable ratios. The three implementations
are timed interleaved (one call of each per round), so clock drift cancels out of the ratios, and
rounds continue until each median's 95% confidence interval is within 1% (or the budget is spent).

Every timed call is a computed call (``_timed_checks``): each round's candidate output is compared, on
a random sample, with the eager reference's output for the same contents, and must share no memory
with earlier outputs the caller still holds; one round, chosen at random, is profiled and every GPU
activity of the candidate must be on the caller's stream; a candidate timed below the physical floor
(inputs read and outputs written once at peak bandwidth) is re-measured alone and rejected if it stays
there. The clock, events and synchronization are bound when this module is imported (before the
candidate is), and host time far above event time beyond eager's (work on another thread, deferred)
is rejected.
"""

from __future__ import annotations

import secrets
import statistics
from collections.abc import Callable
from time import perf_counter as _perf_counter
from typing import TYPE_CHECKING, Any

import torch

from tritonsmith.core.problem_meta import flatten_outputs
from tritonsmith.evaluator import _timed_checks as tc
from tritonsmith.evaluator._guards import live_threads, reject

if TYPE_CHECKING:
    from tritonsmith.evaluator.sandbox._worker import Job

_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
_sleep = torch.cuda._sleep
# Host time beyond event time, over what the eager reference shows, that is tolerated (launch overhead).
_HIDDEN_WORK_MIN_MS = 0.1
_HIDDEN_WORK_RATIO = 3.0
_TIMED_OUTPUT_REL_ERROR = 1e-2

_FLUSH_BYTES = 256 << 20
_INPUT_BUDGET_BYTES = 8 << 30
# Rounds: at least 10 and ~150 ms of timed calls per implementation, then until every median's 95%
# confidence interval is within 1% of it; never more than 2000 rounds or ~2 s of rounds.
_TARGET_MS = 150.0
_MIN_REPS, _MAX_REPS = 10, 2000
_CI_WIDTH = 0.01
_CI_FLOOR_MS = 5e-4  # CUDA events resolve about half a microsecond: a narrower interval is not measurable
_BUDGET_S = 2.0
_WARMUP_CALLS, _WARMUP_MS = 3, 50.0  # warm-up calls (one per input set): all for short kernels, one for long
_VERIFY_CHUNK = 1 << 24  # elements per float64 chunk when checking the outputs produced while timed
_SUSPICIOUS_SPEEDUP = 10.0
# A timed candidate below this share of the light floor is rejected (the floor's own error: datasheet
# bandwidth, outputs that stay in L2 when small).
_LIGHT_MARGIN = 0.5
_SLOW_INPUTS_MS = 10.0  # slower input generation than this: rotate a pool of sets instead of fresh ones


def run_benchmark(job: Job, ref_model: Any, cand_model: Any, make_inputs: Callable[[int], list[Any]]) -> dict[str, Any]:
    from tritonsmith.evaluator._calls import call_candidate

    checked = job.guards.enabled
    refill = _Refill(make_inputs, int(job.spec["seed"]) + 7919)
    flush = torch.empty(_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")

    def candidate(args: list[Any]) -> Any:
        return call_candidate(job, cand_model, args, "benchmark", sync=False)

    compiled_fn, compiled_note = _compile(job, ref_model, [refill.buffers])
    fns: dict[str, Callable[[list[Any]], Any]] = {"candidate": candidate, "eager": lambda a: ref_model(*a)}
    if compiled_fn is not None:
        fns["compiled"] = lambda a: compiled_fn(*a)
    job.stage("benchmark: candidate, eager and torch.compile, interleaved", key="bench_timed")
    checker = _Checker(job, candidate, reference=fns["eager"]) if checked else None
    costs: dict[str, float] = {}
    timed = _time_interleaved(fns, refill, flush, checker=checker, costs=costs)
    for part, seconds in costs.items():  # parts of bench_timed: where the rounds' wall time went
        job.stage_seconds[f"bench_timed/{part}"] = seconds
    cand, eager = timed["candidate"], timed["eager"]
    notes = list(refill.notes)
    if checker is not None:
        job.guards.checkpoint("benchmark")
        checker.finish()
        _cross_check(cand, eager)
    floor = _light_floor(refill, ref_model) if checked else None
    remeasured = False
    best_baseline = min(t["median_ms"] for name, t in timed.items() if name != "candidate")
    below_floor = floor is not None and cand["median_ms"] < floor
    if best_baseline / cand["median_ms"] > _SUSPICIOUS_SPEEDUP or below_floor:
        # A speedup this large is more often a measurement or cheating artefact than a kernel: time the
        # candidate again, alone, on inputs it has never seen, and keep the slower figure.
        job.stage("benchmark: re-measure", key="bench_remeasure")
        again_checker = _Checker(job, candidate, profile=False) if checked else None
        again = _time_interleaved({"candidate": candidate, "eager": fns["eager"]}, refill, flush,
                                  target_ms=2 * _TARGET_MS, checker=again_checker)["candidate"]
        if again_checker is not None:
            again_checker.finish()
            _cross_check(again, eager)
        cand = max(cand, again, key=lambda t: t["median_ms"])
        remeasured = True
        notes.append(f"speedup above {_SUSPICIOUS_SPEEDUP:g}x or below the light floor: re-measured on fresh inputs")
        if floor is not None and cand["median_ms"] < _LIGHT_MARGIN * floor:
            raise reject("faster_than_light", "benchmark", (
                f"timed at {cand['median_ms']:.4f} ms, also when re-measured alone, but reading the inputs and writing "
                f"the outputs once at the GPU's peak bandwidth takes {floor:.4f} ms: the timed calls skip work"))
    if checker is not None and checker.census is not None and checker.census.triton_share is not None:
        job.guards.triton_share = checker.census.triton_share
    refill.release()
    return {"candidate": cand, "eager": eager, "compiled": timed.get("compiled"),
            "compile_mode": job.spec.get("compile_mode", "default"), "compiled_note": compiled_note,
            "remeasured": remeasured, "notes": notes, "light_floor_ms": floor,
            "speedup_ci_vs_eager": _ratio_ci(eager, cand),
            "speedup_ci_vs_compile": _ratio_ci(timed["compiled"], cand) if timed.get("compiled") else None}


class _Refill:
    """The timed input buffers and what is written into them before each round.

    New contents from ``make_inputs`` under a random seed every round, copied in place (same buffers,
    bumped versions), so no output can be looked up by pointer, version or contents. When making a set
    takes longer than ``_SLOW_INPUTS_MS``, a pool of sets is rotated in random order instead (noted).
    This is how rounds are timed with or without the checks: ``checks=False`` changes nothing here.
    """

    def __init__(self, make_inputs: Callable[[int], list[Any]], seed: int) -> None:
        self._make = make_inputs
        t0 = _perf_counter()
        self.buffers = make_inputs(seed)
        _synchronize()
        make_ms = (_perf_counter() - t0) * 1e3
        self.notes: list[str] = []
        self.fresh = make_ms <= _SLOW_INPUTS_MS
        self._pool = [] if self.fresh else _input_sets(make_inputs, seed + 1)
        if not self.fresh:
            self.notes.append(f"inputs take {make_ms:.0f} ms to make: timed rounds rotate {len(self._pool)} "
                              "input sets in random order instead of fresh ones")
        self.rounds = 0

    def next(self) -> None:
        """Write the next round's contents into the buffers (outside any timed region)."""
        self.rounds += 1
        if self.fresh:
            source = self._make(secrets.randbits(31))
        else:
            source = self._pool[secrets.randbelow(len(self._pool))]
        for buf, new in zip(self.buffers, source, strict=True):
            if isinstance(buf, torch.Tensor):
                buf.copy_(new)

    def release(self) -> None:
        self._pool.clear()


class _Checker:
    """The per-round checks of ``_timed_checks`` plus one profiled round at a random point."""

    def __init__(self, job: Job, candidate: Callable[[list[Any]], Any], *, profile: bool = True,
                 reference: Callable[[list[Any]], Any] | None = None) -> None:
        self.rounds = tc.RoundChecker(tc.wrong_bound(job.guards.tf32_spread))
        self._job = job
        self._candidate = candidate
        self._reference = reference
        self._profile_at = 1 + secrets.randbelow(_MIN_REPS) if profile else -1
        self.census: tc.StreamCensus | None = None
        self._full_at = secrets.randbelow(_MIN_REPS)
        # the full comparison accepts what the trials accepted: a TF32 spread between both sides widens it too
        self._full_bound = tc.wrong_bound(job.guards.tf32_spread, _TIMED_OUTPUT_REL_ERROR)

    def before_round(self, r: int, args: list[Any]) -> None:
        if r != self._profile_at:
            return
        job = self._job
        resume = (job.stage_name, job._stage_key)
        job.stage("benchmark: stream census (one profiled call)", key="checks_census")
        try:
            self.census = tc.profile_call(lambda: self._candidate(args), job.guards.counter.names)
            if self.census.foreign and self._reference is not None:
                self.census = self._library_streams_removed(self.census, args)
        except tc.CensusUnavailable as exc:  # no CUPTI here: the launch hook still checks Triton's streams
            job.guards.notes.append(f"stream census unavailable ({exc}); Triton launches checked only")
        finally:
            job.stage(*resume)
        if self.census is not None:
            tc.check_streams(self.census)

    def _library_streams_removed(self, census: tc.StreamCensus, args: list[Any]) -> tc.StreamCensus:
        """The census less what the reference's own library calls also run on their internal streams."""
        assert self._reference is not None
        reference = self._reference
        copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]  # the round's inputs stay as made
        with torch.no_grad():
            ref_census = tc.profile_call(lambda: reference(copies), set())
        kept = tc.without_library_streams(census, ref_census)
        if len(kept.foreign) < len(census.foreign):
            self._job.guards.notes.append(
                f"{len(census.foreign) - len(kept.foreign)} GPU activities ran on a library's internal streams "
                "(the reference's own calls ran them there too): not counted as side-stream work")
        return kept

    def after_round(self, r: int, cand_out: Any, ref_out: Any) -> None:
        """Reuse and the sampled comparison every round; the full comparison on one random round."""
        self.rounds.check_reuse(cand_out)
        if r == self._full_at:
            _verify_timed_outputs({r: cand_out}, {r: [_detach(o) for o in flatten_outputs(ref_out)]},
                                  self._full_bound)
        self.rounds.compare(cand_out, ref_out)

    def finish(self) -> None:
        self.rounds.verdict()
        self.rounds.release()


def _light_floor(refill: _Refill, ref_model: Any) -> float | None:
    with torch.no_grad():
        outs = flatten_outputs(ref_model(*refill.buffers))
    return tc.light_floor_ms(refill.buffers, outs, tc.peak_bandwidth_gbs())


def _ratio_ci(base: dict[str, Any], cand: dict[str, Any]) -> list[float]:
    """A conservative interval of base/cand from the two medians' intervals."""
    return [base["ci_low_ms"] / cand["ci_high_ms"], base["ci_high_ms"] / cand["ci_low_ms"]]


def _detach(x: Any) -> Any:
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def _verify_timed_outputs(outputs: dict[int, Any], expected: list[list[Any]],
                          bound: float = _TIMED_OUTPUT_REL_ERROR) -> None:
    """The last output of each input set while timed must still be the reference's.

    Normwise (relative error <= ``bound``, 1e-2 unless the trials accepted a wider TF32 spread between the
    candidate's library calls and the reference's; no NaN): loose enough for any honest kernel and any tolerance
    policy, tight enough to refuse recycled memory, another input's result or no result. An output that
    is rounding noise around a mathematical constant (the mean of a normalized tensor) has no meaningful
    relative error; it passes when every element is within the ``kernelbench`` tolerance of the reference,
    the criterion its correctness trials already met (another input's result would be as close).
    """
    for i, out in outputs.items():
        got = flatten_outputs(out)
        for j, r in enumerate(expected[i]):
            if not isinstance(r, torch.Tensor):
                continue
            c = got[j] if j < len(got) else None
            ok = len(got) == len(expected[i]) and isinstance(c, torch.Tensor) and c.shape == r.shape
            if ok and r.numel():
                ok = bool(torch.isnan(c).sum() <= torch.isnan(r).sum()) and (
                    _relative_error(c, r) <= bound or _elementwise_close(c, r))
            if not ok:
                raise reject("benchmark_output_wrong", "benchmark", f"output {j} returned while being timed (input set "
                             f"{i}) differs from the reference: ModelNew must compute the same result on every call")


def _relative_error(c: Any, r: Any) -> float:
    """||c - r|| / ||r|| in float64, chunked (see ``_compare.relative_error``)."""
    from tritonsmith.evaluator._compare import relative_error

    return relative_error(c, r, chunk=_VERIFY_CHUNK)


def _elementwise_close(c: Any, r: Any) -> bool:
    """|c - r| <= tol + tol |r| everywhere (tol: the ``kernelbench`` tolerance of r's dtype), a chunk at a time."""
    from tritonsmith.evaluator._compare import kernelbench_tolerance

    if c.dtype != r.dtype or c.device != r.device or not r.is_floating_point():
        return False
    tol = kernelbench_tolerance(r.dtype)
    flat_c, flat_r = c.reshape(-1), r.reshape(-1)
    for lo in range(0, flat_r.numel(), _VERIFY_CHUNK):
        rc, cc = flat_r[lo:lo + _VERIFY_CHUNK], flat_c[lo:lo + _VERIFY_CHUNK]
        if not torch.allclose(cc, rc, atol=tol, rtol=tol, equal_nan=True):
            return False
    return True


def _cross_check(cand: dict[str, Any], eager: dict[str, Any]) -> None:
    """Host time far above event time, beyond eager's own overhead, means work the events did not see."""
    overhead = max(0.0, eager["host_median_ms"] - eager["median_ms"])
    hidden = cand["host_median_ms"] - cand["median_ms"] - overhead
    if hidden > max(_HIDDEN_WORK_MIN_MS, _HIDDEN_WORK_RATIO * cand["median_ms"]):
        raise reject("hidden_work", "benchmark", (
            f"CUDA events time the candidate at {cand['median_ms']:.4f} ms but the host waits "
            f"{cand['host_median_ms']:.4f} ms for the device (eager: {eager['median_ms']:.4f} vs "
            f"{eager['host_median_ms']:.4f} ms): work runs outside the timed stream (another stream, a thread, "
            "or deferred)"))


def _input_sets(make_inputs: Callable[[int], list[Any]], seed: int) -> list[list[Any]]:
    first = make_inputs(seed)
    size = sum(x.numel() * x.element_size() for x in first if isinstance(x, torch.Tensor)) or 1
    count = max(2, min(6, _INPUT_BUDGET_BYTES // size))
    return [first] + [make_inputs(seed + i) for i in range(1, count)]


def _time_interleaved(fns: dict[str, Callable[[list[Any]], Any]], source: _Refill | list[list[Any]], flush: Any,
                      target_ms: float = _TARGET_MS, checker: _Checker | None = None,
                      costs: dict[str, float] | None = None) -> dict[str, dict[str, Any]]:
    """Time each implementation in turn, one call each per round, so the speedup ratios see the same clocks.

    Drift between evaluations (GPU clocks, temperature, allocator state) moves all implementations alike
    within a round; timing them one after another would fold it into the ratio. ``source`` is a
    :class:`_Refill` (fresh contents in the same buffers every round) or a list of input sets rotated in
    turn. ``checker`` sees each round's candidate and eager outputs. ``costs`` (when given) receives the
    wall seconds spent writing inputs, in the checks and in the timed calls.
    """
    sets = source if isinstance(source, list) else None
    with torch.no_grad():
        launch = {name: _warm_up(fn, sets or [source.buffers]) for name, fn in fns.items()}  # type: ignore[union-attr]
        # each implementation sleeps for its own launch time; a sleep a stall lengthened relaxes back
        floor = {name: _sleep_cycles(ms) for name, ms in launch.items()}
        cycles = dict(floor)
        events: dict[str, list[float]] = {name: [] for name in fns}
        hosts: dict[str, list[float]] = {name: [] for name in fns}
        launches: dict[str, list[float]] = {name: [] for name in fns}
        start = _perf_counter()
        wall = {"inputs": 0.0, "checks": 0.0, "calls": 0.0}
        r = 0
        while not _done(r, events, target_ms, _perf_counter() - start):
            t0 = _perf_counter()
            if sets is None:
                source.next()  # type: ignore[union-attr]
            args = sets[r % len(sets)] if sets is not None else source.buffers  # type: ignore[union-attr]
            t1 = _perf_counter()
            if checker is not None:
                checker.before_round(r, args)
            t2 = _perf_counter()
            outs: dict[str, Any] = {}
            for name, fn in fns.items():
                keep = checker is not None and name in ("candidate", "eager")
                ev, host, spent, out, used = _covered_call(fn, args, flush, cycles[name], keep=keep)
                cycles[name] = max(floor[name], used * 3 // 4)
                events[name].append(ev)
                hosts[name].append(host)
                launches[name].append(spent)
                if keep:
                    outs[name] = out
                del out
            t3 = _perf_counter()
            if checker is not None:
                checker.after_round(r, outs["candidate"], outs["eager"])
            outs.clear()
            wall["inputs"] += t1 - t0
            wall["checks"] += t2 - t1 + _perf_counter() - t3
            wall["calls"] += t3 - t2
            r += 1
    if costs is not None:
        costs.update(wall)
    return {name: _stats(events[name], hosts[name], launches[name]) for name in fns}


def _done(rounds: int, events: dict[str, list[float]], target_ms: float, spent_s: float) -> bool:
    """Enough rounds: the minimum and ~target_ms per implementation, then each median's CI within 1% (or
    within the events' resolution, for kernels of a few microseconds)."""
    if rounds < _MIN_REPS:
        return False
    if rounds >= _MAX_REPS or spent_s > _BUDGET_S:
        return True
    if min(sum(v) for v in events.values()) < target_ms and rounds < 200:
        return False
    if rounds % 10:
        return False
    for samples in events.values():
        lo, hi = tc.median_ci(samples)
        if hi - lo > max(_CI_WIDTH * statistics.median(samples), _CI_FLOOR_MS):
            return False
    return True


def _time(fn: Callable[[list[Any]], Any], input_sets: list[list[Any]], flush: Any,
          target_ms: float = _TARGET_MS) -> dict[str, Any]:
    """One implementation alone (the profiler's per-implementation figures)."""
    return _time_interleaved({"fn": fn}, input_sets, flush, target_ms=target_ms)["fn"]


def _stats(events: list[float], hosts: list[float], launches: list[float] | None = None) -> dict[str, Any]:
    q = statistics.quantiles(events, n=5)
    lo, hi = tc.median_ci(events)
    return {"median_ms": statistics.median(events), "p20_ms": q[0], "p80_ms": q[3], "reps": len(events),
            "host_median_ms": statistics.median(hosts), "ci_low_ms": lo, "ci_high_ms": hi,
            "launch_ms": statistics.median(launches) if launches else None}


def _warm_up(fn: Callable[[list[Any]], Any], input_sets: list[list[Any]]) -> float:
    """JIT compile, autotune, allocator: one call per input set (up to 3), but no more once 50 ms are spent.

    The candidate and the compiled reference already ran on these shapes (trials, compilation), so a
    long kernel needs one call to settle; short ones get all three, cheaply. Returns the host time the
    last call took to return (its launch latency, before the device finished).
    """
    start = _perf_counter()
    launch = 0.0
    for i in range(_WARMUP_CALLS):
        t0 = _perf_counter()
        fn(input_sets[i % len(input_sets)])
        launch = (_perf_counter() - t0) * 1e3
        _synchronize()
        if (_perf_counter() - start) * 1e3 > _WARMUP_MS:
            break
    return launch


def _covered_call(fn: Callable[[list[Any]], Any], args: list[Any], flush: Any, cycles: int,
                  keep: bool) -> tuple[float, float, float, Any, int]:
    """One timed call whose launches were all queued before the GPU left the sleep.

    When the GPU finished the sleep before the host returned from the call, it may have idled between
    kernels, and the events would time Python, not the GPU: that sample is dropped and the sleep doubled
    (at most ``_SLEEP_RETRIES`` times; the last sample is kept either way).
    """
    for attempt in range(_SLEEP_RETRIES + 1):
        ev, host, spent, out, covered = _one(fn, args, flush, cycles, keep=keep)
        if covered or attempt == _SLEEP_RETRIES or cycles >= _MAX_SLEEP_MS * _cycles_per_ms():
            return ev, host, spent, out, cycles
        del out
        cycles *= 2
    raise AssertionError("unreachable")


_SLEEP_RETRIES = 4
_MAX_SLEEP_MS = 50.0


def _sleep_cycles(launch_ms: float) -> int:
    """GPU sleep cycles that outlast a host launch time of ``launch_ms`` (0.1-20 ms)."""
    want_ms = min(20.0, max(0.1, 2.0 * launch_ms + 0.05))
    return int(want_ms * _cycles_per_ms())


_CYCLES: list[float] = []


def _cycles_per_ms() -> float:
    if not _CYCLES:
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _sleep(1000)  # first call loads the kernel
        _synchronize()
        start.record()
        _sleep(1_000_000)
        end.record()
        _synchronize()
        _CYCLES.append(1_000_000 / max(start.elapsed_time(end), 1e-3))
    return _CYCLES[0]


def _one(fn: Callable[[list[Any]], Any], args: list[Any], flush: Any, cycles: int = 0,
         keep: bool = False) -> tuple[float, float, float, Any, bool]:
    """(event ms, host ms, launch ms, output, covered): the call is enqueued behind a GPU sleep of
    ``cycles``; ``covered`` when the GPU was still asleep once the call returned (no idle gaps timed).

    The host time is the wait from enqueueing the sleep to the device finishing, less the sleep itself
    (timed by its own event pair): each implementation sleeps for its own launch time, so a sleep left
    in would make a slow launcher look like one that hides work.
    """
    flush.zero_()
    slept, start, end = (_Event(enable_timing=True) for _ in range(3))
    _synchronize()
    t0 = _perf_counter()
    slept.record()
    if cycles:
        _sleep(cycles)
    start.record()
    t1 = _perf_counter()
    out = fn(args)
    t2 = _perf_counter()
    covered = not start.query()
    end.record()
    _synchronize()
    host_ms = (_perf_counter() - t0) * 1e3 - slept.elapsed_time(start)
    return start.elapsed_time(end), host_ms, (t2 - t1) * 1e3, out if keep else None, covered


def _compile(job: Job, ref_model: Any, input_sets: list[list[Any]]) -> tuple[Callable[..., Any] | None, str]:
    """``torch.compile`` of the reference, compiled by its first call; None when disabled or failing."""
    mode = job.spec.get("compile_mode", "default")
    if mode == "none":
        return None, "torch.compile baseline disabled"
    job.stage("benchmark: torch.compile", key="compile")
    before = live_threads()
    try:
        compiled = torch.compile(ref_model, mode=None if mode == "default" else mode)
        t0 = _perf_counter()
        with torch.no_grad():
            compiled(*input_sets[0])
        _synchronize()
        compile_s = _perf_counter() - t0
    except Exception as exc:  # inductor failing on the reference is a baseline gap, not the candidate's fault
        return None, f"torch.compile failed on the reference: {type(exc).__name__}: {str(exc)[:300]}"
    finally:
        # The candidate has not run since the last checkpoint: threads started here are inductor's own.
        job.guards.admit_threads(live_threads() - before)
    return compiled, f"compiled in {compile_s:.1f} s (mode {mode})"
