"""CUDA timing inside the worker: candidate, eager reference and ``torch.compile`` reference.

Each timed call: flush L2 (write a buffer larger than it), synchronize the whole device, record
events around the call, synchronize the device again. Device-wide synchronization means work the
candidate hides on another stream is still inside the host-timed window; the host clock is kept next
to the event figure so the two can be cross-checked. Input sets rotate so that a cached output of the
last call cannot win.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tritonsmith.tools._worker import Job

_FLUSH_BYTES = 256 << 20
_INPUT_BUDGET_BYTES = 8 << 30
_TARGET_MS = 400.0  # time spent measuring each implementation
_MIN_REPS, _MAX_REPS = 10, 200
_SUSPICIOUS_SPEEDUP = 10.0


def run_benchmark(job: Job, ref_model: Any, cand_model: Any, make_inputs: Callable[[int], list[Any]]) -> dict[str, Any]:
    import torch

    from tritonsmith.tools._worker import call_candidate

    seed = int(job.spec["seed"]) + 7919
    input_sets = _input_sets(make_inputs, seed)
    flush = torch.empty(_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    notes: list[str] = []

    def candidate(args: list[Any]) -> Any:
        return call_candidate(job, cand_model, args, "benchmark")

    cand = _time(candidate, input_sets, flush)
    eager = _time(lambda a: ref_model(*a), input_sets, flush)
    compiled, compiled_note = _time_compiled(job, ref_model, input_sets, flush)
    remeasured = False
    best_baseline = min(eager["median_ms"], compiled["median_ms"] if compiled else float("inf"))
    if best_baseline / cand["median_ms"] > _SUSPICIOUS_SPEEDUP:
        # A speedup this large is more often a measurement or cheating artefact than a kernel: time the
        # candidate again, alone, on inputs it has never seen, and keep the slower figure.
        fresh = _input_sets(make_inputs, seed + 104729)
        again = _time(candidate, fresh, flush, target_ms=2 * _TARGET_MS)
        cand = max(cand, again, key=lambda t: t["median_ms"])
        remeasured = True
        notes.append(f"speedup above {_SUSPICIOUS_SPEEDUP:g}x: re-measured alone on fresh inputs")
    return {"candidate": cand, "eager": eager, "compiled": compiled, "compile_mode": job.spec.get("compile_mode", "default"),
            "compiled_note": compiled_note, "remeasured": remeasured, "notes": notes}


def _input_sets(make_inputs: Callable[[int], list[Any]], seed: int) -> list[list[Any]]:
    import torch

    first = make_inputs(seed)
    size = sum(x.numel() * x.element_size() for x in first if isinstance(x, torch.Tensor)) or 1
    count = max(2, min(6, _INPUT_BUDGET_BYTES // size))
    return [first] + [make_inputs(seed + i) for i in range(1, count)]


def _time(fn: Callable[[list[Any]], Any], input_sets: list[list[Any]], flush: Any,
          target_ms: float = _TARGET_MS) -> dict[str, Any]:
    import torch

    with torch.no_grad():
        for args in input_sets[:3]:  # warm-up: JIT compile, autotune, allocator
            fn(args)
        torch.cuda.synchronize()
        first = _one(fn, input_sets[0], flush)[0]
        reps = int(min(_MAX_REPS, max(_MIN_REPS, target_ms / max(first, 1e-3))))
        events: list[float] = []
        hosts: list[float] = []
        for r in range(reps):
            ev, host = _one(fn, input_sets[r % len(input_sets)], flush)
            events.append(ev)
            hosts.append(host)
    q = statistics.quantiles(events, n=5)
    return {"median_ms": statistics.median(events), "p20_ms": q[0], "p80_ms": q[3], "reps": reps,
            "host_median_ms": statistics.median(hosts)}


def _one(fn: Callable[[list[Any]], Any], args: list[Any], flush: Any) -> tuple[float, float]:
    import torch

    flush.zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    start.record()
    fn(args)
    end.record()
    torch.cuda.synchronize()
    host_ms = (time.perf_counter() - t0) * 1e3
    return start.elapsed_time(end), host_ms


def _time_compiled(job: Job, ref_model: Any, input_sets: list[list[Any]], flush: Any) -> tuple[dict[str, Any] | None, str | None]:
    import torch

    mode = job.spec.get("compile_mode", "default")
    if mode == "none":
        return None, "torch.compile baseline disabled"
    job.stage("benchmark: torch.compile")
    try:
        compiled = torch.compile(ref_model, mode=None if mode == "default" else mode)
        t0 = time.perf_counter()
        with torch.no_grad():
            compiled(*input_sets[0])
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
    except Exception as exc:  # inductor failing on the reference is a baseline gap, not the candidate's fault
        return None, f"torch.compile failed on the reference: {type(exc).__name__}: {str(exc)[:300]}"
    timing = _time(lambda a: compiled(*a), input_sets, flush)
    return timing, f"compiled in {compile_s:.1f} s (mode {mode})"
