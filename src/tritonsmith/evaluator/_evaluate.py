"""The evaluator: is a Triton candidate correct, and how fast is it against eager and torch.compile?

``evaluate`` is the plain function; ``tritonsmith.tools.make_evaluate_tool`` wraps it for LangChain agents.

No cheating candidate is reported fast and correct. Three layers (see ``_checks`` and ``_guards``):

1. static checks on the candidate's AST (kernels launched from ``forward``, no reference ``Model``, no
   try/except fallback, no streams/threads/processes/network/monkeypatching/evaluator access, and the
   torch policy: ``hybrid`` (default) or ``strict``);
2. run-time guards in the worker (Triton launches counted, inputs unchanged, outputs fresh plain tensors
   that depend on the inputs, reference memory poisoned, aten ops recorded against the policy, precision
   checked against float64, timers and torch functions untouched, no new threads, processes or streams);
3. timing that synchronizes the device, cross-checks CUDA events with the host clock, verifies the
   outputs produced while timed, and re-measures suspicious speedups.

A candidate that breaks a rule gets status ``rejected`` and ``rule``. One that breaks a static rule still
runs one correctness trial (never timed), so a crash or a wrong output is reported as what it is; if it
would have passed, it is rejected.
"""

from __future__ import annotations

import dataclasses
import functools
import getpass
import logging
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from tritonsmith.core.device import gpu_likely as _gpu_likely
from tritonsmith.core.device import resolve_device
from tritonsmith.core.modload import write_source
from tritonsmith.core.problem import Problem, ProblemError, load_problem
from tritonsmith.evaluator._checks import DEFAULT_POLICY, POLICIES, StaticReport, check_source
from tritonsmith.evaluator._compare import TOLERANCES
from tritonsmith.core.results import (
    BenchmarkReport,
    ChecksReport,
    CorrectnessReport,
    EvalResult,
    EvalStatus,
    Mismatch,
    Timing,
    Violation,
    checks_from_dict,
    last_lines,
)
from tritonsmith.evaluator.sandbox._sandbox import WorkerOutcome, prestart, run_worker

__all__ = ["evaluate", "resolve_device", "EvalResult", "EvalStatus", "POLICIES", "DEFAULT_POLICY"]

log = logging.getLogger(__name__)

Device = Literal["auto", "cpu", "cuda"]
CPU_TIMING_NOTE = "timing needs a CUDA GPU: on the CPU the Triton interpreter checks correctness only"
_DEFAULT_TIMEOUT_S = {"cpu": 600.0, "cuda": 300.0}
# A whole network's candidate holds a hundred kernels or more, each JIT-compiled on its first call, and its
# torch.compile baseline compiles the whole graph: DenseNet201 (109 kernel groups) took over 300 s cold on an
# H100 (2026-12-05). The default grows by this much per Triton kernel beyond the first 30, up to the cap.
_TIMEOUT_PER_KERNEL_S = 3.0
_TIMEOUT_CAP_S = 900.0


def default_timeout_s(device: str, source: str) -> float:
    """The worker's wall-clock limit when none is given: the device's base, more for candidates with many kernels."""
    kernels = source.count("@triton.jit")
    return min(_TIMEOUT_CAP_S, _DEFAULT_TIMEOUT_S[device] + _TIMEOUT_PER_KERNEL_S * max(0, kernels - 30))


def evaluate(
    problem: Problem | str | Path,
    candidate: str | Path,
    *,
    device: Device = "auto",
    trials: int = 5,
    tolerance: str = "kernelbench",
    dtype: str | None = None,
    benchmark: bool = True,
    compile_mode: str = "default",
    timeout_s: float | None = None,
    seed: int = 0,
    scale: bool = False,
    workdir: str | Path | None = None,
    keep_files: bool = False,
    policy: str = DEFAULT_POLICY,
    checks: bool = True,
    generalize: bool = False,
) -> EvalResult:
    """Check a ``ModelNew`` candidate against the reference ``Model`` and, on CUDA, time it.

    The candidate runs in a separate worker process: crashes, hangs and GPU faults become a status,
    never an exception here. Workers are forked from a per-process zygote that has already imported
    torch and triton (``TRITONSMITH_EVAL_ZYGOTE=0`` spawns a fresh interpreter instead; see ``_zygote``). Raises :class:`ProblemError` when the reference itself is broken and
    ``ValueError`` for bad arguments.

    Args:
        problem: a :class:`Problem`, a KernelBench-format file, or its source.
        candidate: source text defining ``ModelNew``, or a path to such a file.
        device: ``"cuda"``, ``"cpu"`` (the Triton interpreter; correctness only) or ``"auto"``.
        trials: correctness trials, each on fresh random inputs from a new seed.
        tolerance: ``"kernelbench"`` (allclose 1e-4 fp32 / 1e-2 half) or ``"numerics"`` (vs float64).
        dtype: cast floating inputs and both models to this dtype (e.g. ``"float16"``); None keeps the problem's.
        benchmark: time candidate, eager and torch.compile on CUDA after a correct verdict.
        compile_mode: torch.compile mode for the baseline (``"default"``, ``"max-autotune"``, ``"none"``).
        timeout_s: wall-clock limit for the worker (default 300 s on CUDA, 600 s on the CPU, plus 3 s per
            Triton kernel beyond 30, at most 900 s).
        seed: base seed for weights and inputs.
        scale: shrink the problem's shapes first (for the CPU interpreter); the result says so.
        policy: how much PyTorch the candidate may use. ``"hybrid"`` (default; KernelBench allows partial
            replacement): PyTorch may keep operations with no kernel yet (e.g. a convolution before a fused
            Triton epilogue), each reported in ``result.checks.torch_ops``, but not run every compute op of
            the reference. ``"strict"``: all compute in Triton kernels.
        checks: the anti-cheating checks (static and run-time). Turn off only to measure their cost: a
            result with ``checks=False`` is not evidence of anything.
        generalize: after a correct verdict, check the candidate again with the inputs' leading dimension
            halved and at an odd size (``result.generalizes``: yes / no / n/a; see ``_generalize``).
    """
    prob = load_problem(problem)
    _check_arguments(trials=trials, tolerance=tolerance, dtype=dtype)
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    dev = resolve_device(device)
    if scale:
        prob = prob.scaled()
    source = Path(candidate).read_text() if _is_path(candidate) else str(candidate)
    static, static_s = _static_checks(source, prob.source, policy) if checks else (StaticReport(), 0.0)
    if static.violations:  # run once, untimed, only to tell a crash or wrong output from a rejection
        trials, benchmark = 1, False
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="tritonsmith-eval-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        candidate_path = write_source(base, "candidate", source)
        problem_path = write_source(base, "reference", prob.source)
        spec = {"problem_path": str(problem_path), "problem_name": prob.name, "candidate_path": str(candidate_path),
                "weights_path": str(prob.weights_path) if prob.weights_path else None, "device": dev,
                "dtype": dtype, "trials": trials, "tolerance": tolerance, "seed": seed, "benchmark": benchmark,
                "compile_mode": compile_mode, "checks": checks, "policy": policy, "tf32_lines": static.tf32_lines}
        outcome = run_worker(spec, base, timeout_s=timeout_s or default_timeout_s(dev, source), env=_worker_env(dev))
        result = _to_result(outcome, prob, dev, tolerance, candidate_path if keep_files else None)
        result = _apply_static(result, static, policy, static_s) if checks else result
        if generalize and result.ok:
            from tritonsmith.evaluator._generalize import check_generalization

            result = check_generalization(result, prob, source, evaluate, device=dev, trials=trials, tolerance=tolerance,
                                          dtype=dtype, timeout_s=timeout_s, seed=seed, policy=policy, checks=checks)
        return result
    finally:
        if not keep_files and not workdir:
            shutil.rmtree(base, ignore_errors=True)


def prestart_worker(device: Device = "auto") -> None:
    """Start the worker zygote for ``device`` in the background (its imports take seconds), so that the
    first :func:`evaluate` finds it ready; e.g. while the first candidate is being generated. Optional.

    Where an NVIDIA device node exists, ``auto`` and ``cuda`` start the CUDA zygote without any CUDA call
    of their own: a process's first one takes seconds on a fresh machine, and the zygote's imports run
    meanwhile instead of after it.
    """
    dev = "cuda" if device in ("auto", "cuda") and _gpu_likely() else resolve_device(device)
    prestart(dev, _worker_env(dev))


def _static_checks(source: str, reference: str, policy: str) -> tuple[StaticReport, float]:
    start = time.perf_counter()
    report = check_source(source, policy=policy, reference_source=reference)
    return report, time.perf_counter() - start


def _apply_static(result: EvalResult, static: StaticReport, policy: str, static_s: float) -> EvalResult:
    """Merge the static findings into the worker's verdict; a static violation never ends ``correct``."""
    runtime = result.checks or ChecksReport(policy=policy)
    violations = tuple(static.violations) + runtime.violations
    checks = dataclasses.replace(runtime, policy=policy, violations=violations, kernels=tuple(static.kernels),
                                 torch_ops=tuple(static.torch_ops) + runtime.torch_ops, static_s=static_s)
    if not static.violations:
        return dataclasses.replace(result, checks=checks)
    first = static.violations[0]
    rules = ", ".join(dict.fromkeys(v.rule for v in static.violations))
    if result.status in (EvalStatus.CORRECT, EvalStatus.REJECTED):
        detail = "\n".join(v.message for v in static.violations[:8])
        return dataclasses.replace(result, status=EvalStatus.REJECTED, rule=first.rule, checks=checks, benchmark=None,
                                   message=f"rejected ({rules}): {first.message}", error=detail)
    return dataclasses.replace(result, checks=checks, message=f"{result.message} (it also breaks rule(s): {rules})")


def _check_arguments(*, trials: int, tolerance: str, dtype: str | None) -> None:
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if tolerance not in TOLERANCES:
        raise ValueError(f"tolerance must be one of {', '.join(TOLERANCES)}, not {tolerance!r}")
    if dtype not in (None, "float32", "float16", "bfloat16"):
        raise ValueError(f"dtype must be float32, float16 or bfloat16, not {dtype!r}")


def _is_path(candidate: str | Path) -> bool:
    if isinstance(candidate, Path):
        return True
    return "\n" not in candidate and candidate.endswith(".py") and Path(candidate).is_file()


def _worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    # pytest names the running test here: it would change the zygote's key, and restart it, every test
    env.pop("PYTEST_CURRENT_TEST", None)
    env["PYTHONUNBUFFERED"] = "1"
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.pop("TRITON_INTERPRET", None)
        # Inductor's parallel-compile pool costs seconds to start in every fresh worker and buys
        # nothing for one reference graph: compile in-process.
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    # Inductor writes its default cache dir into os.environ the first time anything here asks for it;
    # naming it up front keeps this environment, and so the zygote started before that, the same.
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", _inductor_default_cache_dir())
    return env


def _inductor_default_cache_dir() -> str:
    """torch._inductor.runtime.cache_dir_utils.default_cache_dir(), without importing inductor (~1 s)."""
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return os.path.abspath(os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)))


@functools.cache
def _versions() -> dict[str, str]:
    """This process's versions (the worker reports its own; these stand in when it died first)."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "missing"
    return {"python": platform.python_version(), "torch": torch.__version__, "triton": triton_version}


@functools.cache
def _device_name(device: str) -> str:
    """Queried here (a CUDA context in this process) only when the worker died before reporting it."""
    if device == "cpu":
        return f"CPU (Triton interpreter, {platform.machine()})"
    import torch

    return torch.cuda.get_device_name()


def _to_result(outcome: WorkerOutcome, prob: Problem, device: str, tolerance: str,
               candidate_path: Path | None) -> EvalResult:
    reported = outcome.result or {}
    common: dict[str, Any] = {
        "problem": prob.name, "device": device, "tolerance": tolerance,
        "device_name": reported.get("device_name") or _device_name(device),
        "versions": reported.get("versions") or dict(_versions()),
        "scaling_note": prob.scaling_note, "wall_s": outcome.wall_s,
        "candidate_path": str(candidate_path) if candidate_path else None,
        "timing_note": CPU_TIMING_NOTE if device == "cpu" else None,
    }
    if outcome.forged:
        return EvalResult(status=EvalStatus.REJECTED, stage=outcome.stage, rule="evaluator_tampering", **common,
                          message="the worker's result file was not written by the evaluator (no valid signature): "
                                  "the candidate tampered with the evaluation")
    if outcome.timed_out:
        return EvalResult(status=EvalStatus.TIMEOUT, stage=outcome.stage, **common,
                          message=f"the candidate did not finish within the time limit (stage: {outcome.stage})",
                          error=last_lines(outcome.output_tail, 25))
    data = outcome.result
    if data is None:
        return EvalResult(status=EvalStatus.CRASHED, stage=outcome.stage, **common,
                          message=f"the worker died ({_exit_reason(outcome.returncode)}) during {outcome.stage}",
                          error=last_lines(outcome.output_tail, 25))
    if "problem_error" in data:
        raise ProblemError(data["problem_error"])
    return _parse(data, common, outcome.startup_s)


def _parse(data: dict[str, Any], common: dict[str, Any], startup_s: float = 0.0) -> EvalResult:
    correctness = None
    if data.get("correctness"):
        c = dict(data["correctness"])
        m = c.pop("mismatch", None)
        notes = tuple(c.pop("notes", ()))
        mismatch = Mismatch(**{**m, "first_bad_index": tuple(m["first_bad_index"])
                               if m.get("first_bad_index") is not None else None}) if m else None
        correctness = CorrectnessReport(**c, mismatch=mismatch, notes=notes)
    bench = None
    if data.get("benchmark"):
        b = dict(data["benchmark"])
        bench = BenchmarkReport(candidate=Timing(**b["candidate"]), eager=Timing(**b["eager"]),
                                compiled=Timing(**b["compiled"]) if b.get("compiled") else None,
                                compile_mode=b["compile_mode"], compiled_note=b.get("compiled_note"),
                                remeasured=b.get("remeasured", False), notes=tuple(b.get("notes", ())),
                                light_floor_ms=b.get("light_floor_ms"),
                                speedup_ci_vs_eager=_pair(b.get("speedup_ci_vs_eager")),
                                speedup_ci_vs_compile=_pair(b.get("speedup_ci_vs_compile")))
    checks = checks_from_dict({"policy": "hybrid", **data["checks"]}) if data.get("checks") else None
    if checks is not None and data.get("rule"):
        broken = Violation(rule=data["rule"], message=data.get("message", ""), origin="runtime")
        checks = dataclasses.replace(checks, violations=(*checks.violations, broken))
    return EvalResult(status=EvalStatus(data["status"]), message=data.get("message", ""), error=data.get("error"),
                      stage=data.get("stage"), correctness=correctness, benchmark=bench, rule=data.get("rule"),
                      checks=checks, stage_seconds=_with_overhead(data.get("stage_seconds", {}), common["wall_s"], startup_s),
                      **common)


def _pair(value: Any) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if value else None


def _with_overhead(stages: dict[str, float], wall_s: float, startup_s: float = 0.0) -> dict[str, float]:
    """The worker's stage times plus what they leave out.

    ``process``: starting the worker (a fork, or a fresh interpreter with its imports), its exit and the
    result hand-over; ``zygote_start`` (only when this evaluation waited for one): the zygote's own start.
    Keys with a ``/`` are parts of another stage (``bench_timed/checks``) and are not summed again.
    """
    measured = {k: v for k, v in stages.items() if k != "startup" and "/" not in k}
    extra = {"zygote_start": round(startup_s, 3)} if startup_s > 0 else {}
    parts = {k: round(v, 4) for k, v in stages.items() if "/" in k}
    return {"process": round(max(0.0, wall_s - startup_s - sum(measured.values())), 3), **extra, **measured, **parts}


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code} before reporting a result"




if sys.version_info < (3, 11):  # pragma: no cover
    raise RuntimeError("tritonsmith needs Python 3.11 or newer")
