"""The profiler: where a candidate's time goes, and how far it is from the speed of light.

``profile_kernel`` is the plain function; ``tritonsmith.tools.make_profile_tool`` wraps it for LangChain
agents. On a GPU it times candidate, eager reference and (optionally) ``torch.compile`` in a worker
process, breaks one forward of each into kernels (torch.profiler), reads Triton's compile facts of the
candidate's kernels and, when ``ncu`` is there, hardware counters of the top kernels. On a CPU it still reports
the problem's FLOPs and minimum bytes, the bound on the target GPU, and compile facts of the
candidate's kernels compiled ahead of time for that GPU. Candidate code only ever runs in a worker.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tritonsmith.core.device import gpu_likely, resolve_device
from tritonsmith.core.modload import write_source
from tritonsmith.core.problem import Problem, ProblemError, load_problem
from tritonsmith.core.results import Timing, to_jsonable
from tritonsmith.evaluator import prestart_worker, worker_env
from tritonsmith.evaluator.sandbox import run_module
from tritonsmith.profiler._aot import KernelFacts
from tritonsmith.profiler._ncu import GO_CANDIDATE, GO_REFERENCE, NcuJob, NcuKernel, NcuReport, run_process
from tritonsmith.profiler._sol import DeviceCeilings, SpeedOfLight, WorkCount, ceilings_for, speed_of_light, work_count
from tritonsmith.profiler._torch_profile import ForwardBreakdown, breakdown_from_dict

__all__ = ["HINTS_PREFIX", "ImplProfile", "ProfileReport", "ProfileStatus", "hint_codes", "profile_kernel"]

log = logging.getLogger(__name__)

DEFAULT_TARGET_GPU = "NVIDIA H200"
_SMS = {90: 132, 80: 108, 89: 128, 100: 148}
_TIMEOUT_S = {"aot": 240.0, "gpu": 300.0, "ncu": 120.0}
HINTS_PREFIX = "hints: "  # the summary line listing the advice codes (see :func:`hint_codes`)


class ProfileStatus(StrEnum):
    OK = "ok"
    CANDIDATE_ERROR = "candidate_error"  # the candidate failed to load, compile or run: only the reference is profiled
    WORKER_ERROR = "worker_error"  # the profiling worker died or timed out


@dataclass(frozen=True, kw_only=True)
class ImplProfile:
    """One implementation (``reference``, ``compiled`` or ``candidate``) measured on the GPU."""

    label: str
    timing: Timing
    percent_of_sol: float | None
    achieved_gbs: float
    achieved_tflops: float | None
    breakdown: ForwardBreakdown | None = None


@dataclass(frozen=True, kw_only=True)
class ProfileReport:
    """Everything the profiler found; ``summary`` is the short text for the model."""

    status: ProfileStatus
    message: str
    problem: str
    device: str
    device_name: str
    target: str
    work: WorkCount | None
    ceilings: DeviceCeilings | None
    sol: SpeedOfLight | None
    impls: tuple[ImplProfile, ...] = ()
    compile_facts: tuple[KernelFacts, ...] = ()
    launches_per_forward: int | None = None
    ncu: NcuReport | None = None
    candidate_check: dict[str, Any] | None = None
    candidate_error: str | None = None
    summary: str = ""
    notes: tuple[str, ...] = ()
    scaling_note: str | None = None
    stages_s: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0

    def impl(self, label: str) -> ImplProfile | None:
        return next((i for i in self.impls if i.label == label), None)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(dataclasses.asdict(self))

    def feedback(self, limit: int = 2500) -> str:
        """The summary plus the per-kernel details, cut to ``limit`` characters."""
        lines = [self.summary]  # already names the candidate's kernels, 4 compile facts and the top ncu kernel
        lines += [i.breakdown.describe() for i in self.impls if i.breakdown and i.label != "candidate"]
        lines += [f.describe() for f in self.compile_facts[4:8]]
        if self.ncu and self.ncu.kernels:
            lines += ["ncu " + k.describe() for k in self.ncu.kernels[1:3]]
        text = "\n".join(line for line in lines if line)
        return text if len(text) <= limit else text[: limit - 4] + " ..."


def profile_kernel(
    problem: Problem | str | Path,
    candidate_source: str | Path | None = None,
    *,
    device: str = "auto",
    ncu: bool = True,
    compiled: bool = False,
    target_gpu: str | None = None,
    arch: int | None = None,
    timeout_s: float | None = None,
    seed: int = 0,
) -> ProfileReport:
    """Profile a Triton candidate (``ModelNew`` source or path) against the reference problem.

    Reports the speed-of-light floor (FLOPs and minimum bytes against the device's measured or
    datasheet ceilings), the bound, and on CUDA each implementation's time as % of that floor, a
    per-kernel breakdown of one forward, Triton compile facts and ncu counters. ``candidate_source``
    None profiles the reference alone. ``device``: "auto", "cuda" or "cpu" (no timing; compile facts
    ahead of time for ``target_gpu``/``arch``, default an H200 and sm_90). ``compiled`` adds
    torch.compile of the reference. Raises :class:`ProblemError` only when the reference is broken.
    """
    started = time.perf_counter()
    early = device != "cpu" and gpu_likely()
    if early:  # before anything here touches CUDA: the worker's imports (~12 s) overlap all of it
        prestart_worker("cuda")
    dev = resolve_device(device)
    if dev == "cuda" and not early:
        prestart_worker(dev)
    prob = load_problem(problem)
    work = work_count(prob.inspect())
    source = _read_candidate(candidate_source)
    workdir = Path(tempfile.mkdtemp(prefix="tritonsmith-profile-"))
    prepared_s = time.perf_counter() - started
    try:
        if dev == "cpu":
            report = _profile_cpu(prob, work, source, workdir, target_gpu or _default_target(), arch, timeout_s)
        else:
            report = _profile_gpu(prob, work, source, workdir, ncu=ncu, compiled=compiled, timeout_s=timeout_s,
                                  seed=seed)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report = dataclasses.replace(report, wall_s=round(time.perf_counter() - started, 2), scaling_note=prob.scaling_note,
                                 stages_s={"load and count": round(prepared_s, 3), **report.stages_s})
    return dataclasses.replace(report, summary=summarize(report))


# -- CPU: counts, bound and compile facts ahead of time ---------------------------------------------------

def _profile_cpu(prob: Problem, work: WorkCount, source: str | None, workdir: Path, target_gpu: str,
                 arch: int | None, timeout_s: float | None) -> ProfileReport:
    ceilings = ceilings_for(target_gpu)
    sol = speed_of_light(work, ceilings) if ceilings else None
    arch = arch or 90
    notes = [f"no GPU: bound and floor are for {target_gpu}; compile facts are for sm_{arch} (ahead of time)"]
    if ceilings is None:
        notes.append(f"no ceilings known for {target_gpu!r}: pass target_gpu='NVIDIA H200' or measure on the GPU")
    base = dict(problem=prob.name, device="cpu", device_name="cpu", target=f"{target_gpu} (sm_{arch})", work=work,
                ceilings=ceilings, sol=sol)
    if source is None:
        return ProfileReport(status=ProfileStatus.OK, message="reference only", notes=tuple(notes), **base)
    spec = {"problem_path": str(write_source(workdir, "reference", prob.source)), "problem_name": prob.name,
            "candidate_path": str(write_source(workdir, "candidate", source)), "arch": arch,
            "result_path": str(workdir / "aot.json")}
    data, error, _ = _run_worker("tritonsmith.profiler._aot", spec, workdir, timeout_s or _TIMEOUT_S["aot"], cpu=True)
    if data is None or "error" in data:
        message = error or data.get("error", "")  # type: ignore[union-attr]
        return ProfileReport(status=ProfileStatus.CANDIDATE_ERROR, message=message, candidate_error=message,
                             notes=tuple(notes), **base)
    facts = tuple(_facts(f) for f in data["facts"])
    return ProfileReport(status=ProfileStatus.OK, message="compile facts ahead of time", compile_facts=facts,
                         launches_per_forward=data.get("launches"), notes=tuple(notes + data.get("notes", [])),
                         stages_s={"record": data.get("record_s", 0.0), "compile": data.get("compile_s", 0.0)},
                         **base)


# -- GPU: timings, breakdowns, JIT facts, counters --------------------------------------------------------

def _profile_gpu(prob: Problem, work: WorkCount, source: str | None, workdir: Path, *, ncu: bool, compiled: bool,
                 timeout_s: float | None, seed: int) -> ProfileReport:
    spec: dict[str, Any] = {
        "problem_path": str(write_source(workdir, "reference", prob.source)), "problem_name": prob.name,
        "candidate_path": str(write_source(workdir, "candidate", source)) if source else None,
        "weights_path": str(prob.weights_path) if prob.weights_path else None, "dtype": None, "seed": seed,
        "compiled": compiled, "result_path": str(workdir / "gpu.json"), "stage_path": str(workdir / "stage.txt")}
    worker_timeout = timeout_s or _TIMEOUT_S["gpu"]
    job = NcuJob(spec, workdir, timeout_s=worker_timeout + _TIMEOUT_S["ncu"], env=_worker_env(cpu=False)) if ncu else None
    try:
        return _profile_gpu_run(prob, work, source, workdir, spec, worker_timeout, job)
    finally:
        if job is not None:
            job.cancel()  # a no-op after go(); otherwise (a failed worker, or our own bug) ncu's driver exits


def _profile_gpu_run(prob: Problem, work: WorkCount, source: str | None, workdir: Path, spec: dict[str, Any],
                     worker_timeout: float, job: NcuJob | None) -> ProfileReport:
    t0 = time.perf_counter()
    data, error, zygote_wait_s = _run_worker("tritonsmith.profiler._torch_profile", spec, workdir, worker_timeout)
    worker_s = time.perf_counter() - t0
    if data is None:
        status = ProfileStatus.CANDIDATE_ERROR if source else ProfileStatus.WORKER_ERROR
        return ProfileReport(status=status, message=error or "worker failed", problem=prob.name, device="cuda",
                             device_name="?", target="?", work=work, ceilings=None, sol=None, candidate_error=error)
    if "problem_error" in data:
        raise ProblemError(data["problem_error"])
    ceilings = DeviceCeilings(**data["ceilings"]) if data.get("ceilings") else None
    sol = speed_of_light(work, ceilings) if ceilings else None
    impls = tuple(_impl(label, d, work, sol) for label, d in data["impls"].items())
    cand_error = data.get("candidate_error")
    status = ProfileStatus.CANDIDATE_ERROR if cand_error else ProfileStatus.OK
    ncu_report = None
    if job is not None:
        ncu_report = job.go(GO_CANDIDATE if spec["candidate_path"] and not cand_error else GO_REFERENCE)
    error_text = f"{cand_error['message']}: {cand_error.get('error') or ''}".strip(": ") if cand_error else None
    return ProfileReport(
        status=status, message=error_text or "profiled", problem=prob.name, device="cuda",
        device_name=data["device_name"], target=data["device_name"], work=work, ceilings=ceilings, sol=sol, impls=impls,
        compile_facts=tuple(_facts(f) for f in data.get("facts", [])), launches_per_forward=data.get("launches"),
        ncu=ncu_report, candidate_check=data.get("check"), candidate_error=error_text, notes=tuple(data.get("notes", [])),
        stages_s={"worker start": round(zygote_wait_s, 2), **data.get("stages_s", {}), "worker": round(worker_s, 2),
                  "ncu": ncu_report.wall_s if ncu_report is not None else 0.0})


def _impl(label: str, data: dict[str, Any], work: WorkCount, sol: SpeedOfLight | None) -> ImplProfile:
    timing = Timing(**data["timing"])
    seconds = timing.median_ms * 1e-3
    return ImplProfile(label=label, timing=timing, percent_of_sol=sol.percent(timing.median_ms) if sol else None,
                       achieved_gbs=work.min_bytes / seconds / 1e9,
                       achieved_tflops=work.flops / seconds / 1e12 if work.flops else None,
                       breakdown=breakdown_from_dict(data["breakdown"]) if data.get("breakdown") else None)


def _facts(data: dict[str, Any]) -> KernelFacts:
    d = dict(data)
    d["grid"] = tuple(d["grid"]) if d.get("grid") else None
    return KernelFacts(**d)


def _run_worker(module: str, spec: dict[str, Any], workdir: Path, timeout_s: float,
                cpu: bool = False) -> tuple[dict[str, Any] | None, str | None, float]:
    """(the worker's result, or None and why; seconds spent waiting for the zygote to start)."""
    spec_path = workdir / f"{module.rsplit('.', 1)[-1]}_spec.json"
    spec_path.write_text(json.dumps(spec))
    if cpu:  # ahead-of-time facts need real compilation: a fresh interpreter without TRITON_INTERPRET
        code, timed_out, output, _ = run_process([sys.executable, "-m", module, str(spec_path)], timeout_s=timeout_s,
                                                 env=_worker_env(cpu=True), log_path=spec_path.with_suffix(".log"))
        waited = 0.0
    else:  # forked from the evaluator's CUDA zygote: torch, triton and inductor are already imported
        run = run_module(module, spec_path, workdir, timeout_s=timeout_s, env=worker_env("cuda"), device="cuda")
        code, timed_out, output, waited = run.returncode, run.timed_out, run.output_tail, run.zygote_wait_s
    result = Path(spec["result_path"])
    if timed_out:
        return None, f"profiling did not finish within {timeout_s:.0f} s", waited
    if not result.exists():
        tail = "\n".join(ln for ln in output.splitlines() if ln.strip())[-1500:]
        return None, f"the profiling worker died (exit {code}) before reporting:\n{tail}", waited
    return json.loads(result.read_text()), None, waited


def _worker_env(*, cpu: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)  # facts need real compilation, never the interpreter
    env["PYTHONUNBUFFERED"] = "1"
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _read_candidate(candidate: str | Path | None) -> str | None:
    if candidate is None:
        return None
    if isinstance(candidate, Path) or ("\n" not in candidate and candidate.endswith(".py") and Path(candidate).is_file()):
        return Path(candidate).read_text()
    return str(candidate)


def _default_target() -> str:
    return os.environ.get("TRITONSMITH_TARGET_GPU", DEFAULT_TARGET_GPU)


# -- the text for the model ---------------------------------------------------------------------------------

def summarize(report: ProfileReport) -> str:
    """A few lines: the bound, how far from the floor, where the time goes, and what to try next."""
    lines = [_headline(report)]
    cand = report.impl("candidate")
    if cand and cand.breakdown:
        lines.append(cand.breakdown.describe(limit=3))
    elif report.launches_per_forward is not None:
        names = ", ".join(f"{f.kernel} x{f.launches}" for f in report.compile_facts)
        lines.append(f"candidate launches {report.launches_per_forward} Triton kernel(s) per forward: {names}")
    if report.compile_facts:
        lines.append("compile facts: " + "; ".join(f.describe() for f in report.compile_facts[:4]))
    if report.ncu is not None:
        if report.ncu.kernels:
            lines.append(f"ncu ({report.ncu.target}): " + report.ncu.kernels[0].describe())
        else:
            lines.append(f"ncu: {report.ncu.note}")
    advice = _advice(report)
    if advice:
        texts = [text for _, text in advice]
        lines.append("next: " + texts[0] + ("" if len(texts) == 1 else "; also: " + "; ".join(texts[1:3])))
        lines.append(HINTS_PREFIX + ", ".join(dict.fromkeys(code for code, _ in advice)))
    return "\n".join(lines)


def hint_codes(text: str) -> tuple[str, ...]:
    """The advice codes of a profile summary (its ``hints:`` line): what a generator without an LLM reads.

    Codes: near_peak, fix_error, fuse_kernels, torch_outside, launch_bound, no_compile, spills,
    shared_memory, few_programs, extra_dram_traffic, low_occupancy, memory_bound, compute_bound.
    """
    for line in text.splitlines():
        if line.startswith(HINTS_PREFIX):
            return tuple(c.strip() for c in line[len(HINTS_PREFIX):].split(",") if c.strip())
    return ()


def _headline(r: ProfileReport) -> str:
    if r.candidate_error and not r.impls:
        return f"candidate failed: {r.candidate_error[:400]}"
    sol, work = r.sol, r.work
    if sol is None or work is None or r.ceilings is None:
        return f"{r.problem}: no speed-of-light figure (no ceilings for {r.target})"
    bw = r.ceilings.bandwidth_gbs
    rate, mode = r.ceilings.matmul_rate(work.dtype)
    ai = f"{sol.arithmetic_intensity:.1f}" if sol.arithmetic_intensity is not None else "?"
    ridge = f"{sol.ridge_point:.0f}" if sol.ridge_point else "?"
    floor = (f"floor {_ms(sol.floor_ms)} ({work.min_bytes / 1e6:.1f} MB at {bw / 1e3:.2f} TB/s"
             + (f", {work.flops / 1e9:.1f} GFLOP at {rate:.0f} TFLOP/s {mode}" if work.flops and rate else "") + ")")
    where = f"{r.ceilings.source} ceilings of {r.ceilings.device_name}"
    if not r.impls:
        return (f"{r.problem}: {sol.bound}-bound ({ai} FLOP/byte vs ridge {ridge}); {floor}; {where}; "
                "no timing on this device")
    parts = []
    for impl in r.impls:
        pct = f"{impl.percent_of_sol:.0f}%" if impl.percent_of_sol is not None else "?"
        parts.append(f"{impl.label} {_ms(impl.timing.median_ms)} ({pct} of speed of light)")
    main = r.impl("candidate") or r.impls[0]
    if sol.bound == "memory":
        achieved = f"{main.achieved_gbs / 1e3:.2f} TB/s = {100 * main.achieved_gbs / bw:.0f}% of bandwidth"
    else:
        achieved = f"{main.achieved_tflops or 0:.0f} TFLOP/s = {100 * (main.achieved_tflops or 0) / (rate or 1):.0f}% of {mode}"
    err = f" [candidate failed: {r.candidate_error[:200]}]" if r.candidate_error else ""
    return f"{main.label}: {sol.bound}-bound at {achieved}; " + ", ".join(parts) + f"; {floor}; {where}.{err}"


def _advice(r: ProfileReport) -> list[tuple[str, str]]:
    """Ordered (code, suggestion) pairs; the first is the one to try next."""
    if r.candidate_error:
        return [("fix_error", "fix the candidate first (see the error above)")]
    sol, cand = r.sol, r.impl("candidate")
    out: list[tuple[str, str]] = []
    pct = cand.percent_of_sol if cand else None
    if pct is not None and pct >= 85:
        return [("near_peak", f"within {pct:.0f}% of the speed of light: little left to gain")]
    launches = (cand.breakdown.triton_launches if cand and cand.breakdown else None) or r.launches_per_forward
    memory = sol is not None and sol.bound == "memory"
    if launches and launches > 1 and memory:
        out.append(("fuse_kernels", f"{launches} kernels where 1 would do: fuse them into one kernel "
                    "(each extra kernel writes and re-reads its intermediate through DRAM)"))
    if cand and cand.breakdown and cand.breakdown.kernel_us > 0:
        b = cand.breakdown
        if b.other_us / b.kernel_us > 0.2:
            others = ", ".join(k.name[:40] for k in b.kernels if not k.triton)[:160]
            out.append(("torch_outside", f"{100 * b.other_us / b.kernel_us:.0f}% of GPU time is outside Triton "
                        f"kernels ({others}): move that work into the kernel"))
        if b.span_us and b.gap_us / b.span_us > 0.3:
            out.append(("launch_bound", f"launch-bound: {b.gap_us:.0f} us of {b.span_us:.0f} us idle between "
                        "kernels: fewer, larger kernels"))
    out += _facts_advice(r)
    out += _ncu_advice(r, memory)
    if (pct is None or pct < 60) and sol is not None and not out:
        out.append(("memory_bound" if memory else "compute_bound", _bound_advice(memory, pct)))
    return out


def _facts_advice(r: ProfileReport) -> list[tuple[str, str]]:
    out = []
    for f in r.compile_facts:
        if f.error:
            out.append(("no_compile", f"{f.kernel} does not compile for {f.target}: {f.error[:200]}"))
        elif f.spills:
            out.append(("spills", f"{f.kernel} spills ({f.local_bytes} B local memory per thread, {f.registers} "
                        "registers): smaller tiles, fewer num_stages or more num_warps"))
        elif f.shared_bytes and f.shared_bytes > 227 * 1024:
            out.append(("shared_memory", f"{f.kernel} needs {f.shared_bytes // 1024} KiB shared memory (> 227 KiB "
                        "on sm_90): smaller tiles"))
    sms = _SMS.get(int(r.compile_facts[0].target.removeprefix("sm_")), 132) if r.compile_facts else 132
    small = [f for f in r.compile_facts if f.programs is not None and f.programs < sms]
    if small:
        out.append(("few_programs", f"{small[0].kernel} runs {small[0].programs} programs for {sms} SMs: split "
                    "the work finer"))
    return out


def _ncu_advice(r: ProfileReport, memory: bool) -> list[tuple[str, str]]:
    if r.ncu is None or not r.ncu.kernels or r.work is None:
        return []
    out = []
    moved = sum(k.dram_bytes or 0.0 for k in r.ncu.kernels)
    if memory and r.ncu.total_kernels <= len(r.ncu.kernels) and moved > 1.5 * r.work.min_bytes:
        out.append(("extra_dram_traffic", f"moves {moved / r.work.min_bytes:.1f}x the minimum bytes through DRAM: "
                    "read each input once (keep rows in registers/shared memory instead of a second pass)"))
    top: NcuKernel = r.ncu.kernels[0]
    if top.achieved_occupancy_pct is not None and top.achieved_occupancy_pct < 25:
        out.append(("low_occupancy", f"low occupancy ({top.achieved_occupancy_pct:.0f}%) in {top.name[:40]}: "
                    "fewer registers or shared memory per program, or more programs"))
    return out


def _bound_advice(memory: bool, pct: float | None) -> str:
    at = f" at {pct:.0f}%" if pct is not None else ""
    if memory:
        return (f"memory-bound{at}: one pass over the data with wide contiguous loads (BLOCK of 1024-4096 "
                "elements, 4-8 warps), enough programs to fill every SM, no redundant reads")
    return (f"compute-bound{at}: tensor cores via tl.dot on 128x128+ tiles (BLOCK_K 32-64), num_stages 3-4, "
            "grouped program order for L2 reuse; fuse the epilogue into the matmul")


def _ms(ms: float) -> str:
    return f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.3f} ms"
