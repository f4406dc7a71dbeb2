"""Where one forward's GPU time goes (torch.profiler), and the GPU profiling worker.

Worker: ``python -m tritonsmith.profiler._torch_profile SPEC.json``. In one process it builds the
reference (and the candidate, if any) as the evaluator does, loads or measures the device's ceilings,
times candidate, eager reference and (optionally) ``torch.compile`` with the evaluator's timing loop
(L2 flushed, device-wide synchronisation), records one forward of each through torch.profiler, and
reads the Triton compile facts of the kernels the candidate launched. The candidate's failures end up
in the result; the reference's are a ``problem_error``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_TOP_KERNELS = 8
_CHECK_TOLERANCE = 1e-2


@dataclass(frozen=True, kw_only=True)
class KernelTime:
    """One kernel name's GPU time within one forward."""

    name: str
    time_us: float
    launches: int
    share: float
    triton: bool


@dataclass(frozen=True, kw_only=True)
class ForwardBreakdown:
    """GPU activity of one forward call: kernels by time, Triton vs the rest, idle gaps."""

    label: str
    kernels: tuple[KernelTime, ...]
    launches: int
    distinct_kernels: int
    kernel_us: float
    triton_us: float
    other_us: float
    span_us: float
    gap_us: float
    omitted: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def triton_launches(self) -> int:
        return sum(k.launches for k in self.kernels if k.triton)

    def describe(self, limit: int = 4) -> str:
        head = ", ".join(f"{k.name[:48]} {k.share:.0%}" + (f" x{k.launches}" if k.launches > 1 else "")
                         for k in self.kernels[:limit])
        more = f", +{len(self.kernels) - limit + self.omitted} more" if len(self.kernels) + self.omitted > limit else ""
        return (f"{self.label}: {self.launches} kernel launches, {self.kernel_us:.1f} us on the GPU "
                f"({self.other_us:.1f} us outside Triton kernels, {self.gap_us:.1f} us idle between them): {head}{more}")


def summarize_kernels(label: str, events: Iterable[tuple[str, float, float]], triton_names: set[str],
                      *, top: int = _TOP_KERNELS) -> ForwardBreakdown:
    """Aggregate ``(name, start_us, end_us)`` device events of one forward by kernel name.

    A kernel counts as Triton when its name is one the candidate launched (``triton_names``) or starts
    with ``triton_`` (torch.compile's Inductor kernels). Memcpy/memset count as "outside Triton".
    """
    spans = sorted(events, key=lambda e: e[1])
    totals: dict[str, list[float]] = {}
    for name, start, end in spans:
        entry = totals.setdefault(name, [0.0, 0])
        entry[0] += max(0.0, end - start)
        entry[1] += 1
    kernel_us = sum(v[0] for v in totals.values())
    span_us = (max(e[2] for e in spans) - spans[0][1]) if spans else 0.0

    def is_triton(name: str) -> bool:
        return name in triton_names or name.startswith("triton_") or any(name.startswith(t) for t in triton_names)

    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])
    kernels = tuple(KernelTime(name=n, time_us=round(t, 3), launches=int(c), share=t / kernel_us if kernel_us else 0.0,
                               triton=is_triton(n)) for n, (t, c) in ranked)
    triton_us = sum(k.time_us for k in kernels if k.triton)
    return ForwardBreakdown(label=label, kernels=kernels[:top], launches=len(spans), distinct_kernels=len(kernels),
                            kernel_us=round(kernel_us, 3), triton_us=round(triton_us, 3),
                            other_us=round(kernel_us - triton_us, 3), span_us=round(span_us, 3),
                            gap_us=round(max(0.0, span_us - kernel_us), 3), omitted=max(0, len(kernels) - top))


def breakdown_from_dict(data: dict[str, Any]) -> ForwardBreakdown:
    d = dict(data)
    d["kernels"] = tuple(KernelTime(**k) for k in d["kernels"])
    d["notes"] = tuple(d.get("notes", ()))
    return ForwardBreakdown(**d)


def profile_forward(label: str, fn: Callable[[], Any], triton_names: set[str]) -> ForwardBreakdown:
    """Run ``fn`` (one forward, already warmed up) under torch.profiler and summarise its kernels."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof, torch.no_grad():
        fn()
        torch.cuda.synchronize()
    events = []
    for e in prof.events():
        if getattr(e, "device_type", None) == DeviceType.CUDA:
            events.append((e.name, float(e.time_range.start), float(e.time_range.end)))
    return summarize_kernels(label, events, triton_names)


# -- worker ---------------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    from tritonsmith.core.problem import ProblemError

    spec = json.loads(Path(argv[1]).read_text())
    try:
        result = run(spec)
    except ProblemError as exc:
        result = {"problem_error": str(exc)}
    path = Path(spec["result_path"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(path)
    return 0


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from tritonsmith.core.problem_meta import exec_reference
    from tritonsmith.evaluator import CandidateFailure
    from tritonsmith.evaluator import input_sets as _input_sets
    from tritonsmith.evaluator.sandbox import Job, build_models, input_factory, load_candidate
    from tritonsmith.profiler._sol import ceilings_for

    stages: dict[str, float] = {}
    clock = _Clock(stages)
    job = Job({**spec, "candidate_path": spec.get("candidate_path") or spec["problem_path"], "device": "cuda"})
    result: dict[str, Any] = {"device_name": torch.cuda.get_device_name(), "impls": {}, "notes": [], "stages_s": stages}
    with clock("ceilings"):
        ceilings = ceilings_for(result["device_name"], measure=spec.get("measure_ceilings", True))
        result["ceilings"] = asdict(ceilings) if ceilings else None
    ref_module = exec_reference(Path(spec["problem_path"]).read_text(), spec["problem_name"])
    has_candidate = bool(spec.get("candidate_path"))
    try:
        with clock("build"):
            cls = load_candidate(job) if has_candidate else ref_module.Model
            ref_model, cand_model, _ = build_models(job, ref_module, cls)
    except CandidateFailure as exc:
        result["candidate_error"] = {"status": exc.status, "stage": exc.stage, "message": exc.message,
                                     "error": exc.detail}
        has_candidate = False
        job.spec["candidate_path"] = spec["problem_path"]
        ref_model, cand_model, _ = build_models(job, ref_module, ref_module.Model)
    with clock("inputs"):
        input_sets = _input_sets(input_factory(job, ref_module), int(spec.get("seed", 0)) + 7919)
    impls: dict[str, Callable[[list[Any]], Any]] = {"reference": lambda a: ref_model(*a)}
    if has_candidate:
        candidate = _prepare_candidate(job, cand_model, ref_model, input_sets[0], result, clock)
        if candidate is not None:
            impls["candidate"] = candidate
    if spec.get("compiled"):
        with clock("torch.compile"):
            compiled = _compile_reference(ref_model, input_sets[0], result)
        if compiled is not None:
            impls["compiled"] = compiled
    for label, fn in impls.items():
        try:
            with clock(f"time+profile {label}"):
                result["impls"][label] = _measure(label, fn, input_sets, result.get("triton_names", []))
        except CandidateFailure as exc:  # only the candidate's calls raise this; keep the reference's figures
            result["candidate_error"] = {"status": exc.status, "stage": exc.stage, "message": exc.message,
                                         "error": exc.detail}
    return result


def _prepare_candidate(job: Any, cand_model: Any, ref_model: Any, args: list[Any], result: dict[str, Any],
                       clock: _Clock) -> Callable[[list[Any]], Any] | None:
    """Warm the candidate up (JIT compile, autotune), compare it once, record its launches' facts."""
    import torch

    from tritonsmith.evaluator import CandidateFailure
    from tritonsmith.evaluator.sandbox import call_candidate
    from tritonsmith.profiler._aot import LaunchRecorder, facts_from_launches

    def candidate(a: list[Any]) -> Any:
        return call_candidate(job, cand_model, a, "profile")

    try:
        with clock("candidate warm-up"):
            out = candidate(args)
        result["check"] = _compare(out, ref_model, args)
        recorder = LaunchRecorder(execute=True, arch=_arch())
        with clock("candidate facts"), recorder.active():
            candidate(args)
        facts = facts_from_launches(recorder.launches, arch=_arch())
    except CandidateFailure as exc:
        result["candidate_error"] = {"status": exc.status, "stage": exc.stage, "message": exc.message,
                                     "error": exc.detail}
        return None
    result["facts"] = [asdict(f) for f in facts]
    result["launches"] = len(recorder.launches)
    result["triton_names"] = sorted({f.kernel for f in facts})
    torch.cuda.synchronize()
    return candidate


def _compare(out: Any, ref_model: Any, args: list[Any]) -> dict[str, Any]:
    """A quick sanity check (the evaluator is the judge): max abs error of each output vs the reference."""
    import torch

    from tritonsmith.core.problem_meta import flatten_outputs

    with torch.no_grad():
        ref = flatten_outputs(ref_model(*args))
    cand = flatten_outputs(out)
    if len(ref) != len(cand):
        return {"ok": False, "message": f"candidate returned {len(cand)} outputs, the reference {len(ref)}"}
    worst = 0.0
    for c, r in zip(cand, ref, strict=True):
        if not isinstance(c, torch.Tensor) or c.shape != r.shape:
            return {"ok": False, "message": "candidate output shape differs from the reference"}
        worst = max(worst, float((c.float() - r.float()).abs().max()))
        if not torch.allclose(c.float(), r.float(), atol=_CHECK_TOLERANCE, rtol=_CHECK_TOLERANCE):
            return {"ok": False, "message": f"candidate output differs from the reference (max abs error {worst:.3g})"}
    return {"ok": True, "max_abs_error": worst}


def _compile_reference(ref_model: Any, args: list[Any], result: dict[str, Any]) -> Callable[[list[Any]], Any] | None:
    import torch

    try:
        compiled = torch.compile(ref_model)
        with torch.no_grad():
            compiled(*args)
        torch.cuda.synchronize()
    except Exception as exc:  # inductor failing on the reference is a missing baseline, not our error
        result["notes"].append(f"torch.compile failed on the reference: {type(exc).__name__}: {str(exc)[:200]}")
        return None
    return lambda a: compiled(*a)


def _measure(label: str, fn: Callable[[list[Any]], Any], input_sets: list[list[Any]],
             triton_names: list[str]) -> dict[str, Any]:
    import torch

    from tritonsmith.evaluator import FLUSH_BYTES as _FLUSH_BYTES
    from tritonsmith.evaluator import time_forward as _time

    flush = torch.empty(_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    timing = _time(fn, input_sets, flush)
    with torch.no_grad():
        breakdown = profile_forward(label, lambda: fn(input_sets[0]), set(triton_names))
    return {"timing": timing, "breakdown": asdict(breakdown)}


def _arch() -> int:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


class _Clock:
    """``with clock("stage"):`` records the stage's wall time in seconds."""

    def __init__(self, stages: dict[str, float]) -> None:
        self.stages = stages

    def __call__(self, name: str) -> _Clock:
        self._name = name
        return self

    def __enter__(self) -> None:
        self._t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.stages[self._name] = round(time.perf_counter() - self._t0, 3)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(sys.argv))
