"""One unit of suite work (optimize a problem, or score a given kernel) and how a worker executes it.

Tasks cross process boundaries as JSON, so the optimize function travels as an import reference
(``"package.module:function"``); ``None`` means tritonsmith's own :func:`tritonsmith.graphs.optimize`.
"""

from __future__ import annotations

import importlib
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from tritonsmith.core.problem import Problem, ProblemError
from tritonsmith.core.problem_meta import check_reference
from tritonsmith.suite._adapt import outcome_from_optimize_result
from tritonsmith.suite._outcome import OptimizeOutcome
from tritonsmith.suite.results import ERROR, INVALID_PROBLEM, NO_CANDIDATE, STOPPED, ProblemRecord, write_atomic
from tritonsmith.suite.settings import EVAL, OPTIMIZE, SuiteSettings

log = logging.getLogger(__name__)


class OptimizeFn(Protocol):
    """The optimize loop as the runner calls it (``tritonsmith.graphs.optimize`` fits it).

    ``generator`` is a name (``"builtin"``, ``"llm"``, ``"auto"``) or None for the loop's default;
    ``settings`` are evaluator settings (``trials``, ``tolerance``, ``policy``, ``eval_timeout_s``, ``use_memory``).
    It may return an :class:`OptimizeOutcome` or tritonsmith's ``OptimizeResult``.
    """

    def __call__(self, problem: Problem, *, generator: str | None, iterations: int, device: str,
                 **settings: Any) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class SuiteTask:
    """One problem of a run, with the run's settings (resolved once by ``run_suite``: device, optimize_fn)."""

    key: str
    problem_path: str
    level: int | None
    run_dir: str
    settings: SuiteSettings
    candidate_path: str | None = None

    @property
    def mode(self) -> str:
        return self.settings.mode

    @property
    def device(self) -> str:
        return self.settings.device

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SuiteTask:
        return cls(**{**data, "settings": SuiteSettings.from_dict(data["settings"])})


def execute_task(task: SuiteTask) -> ProblemRecord:
    """Run one task in this process. Verdicts become records; a bug of ours becomes an ``error`` record."""
    base = {"key": task.key, "level": task.level, "mode": task.mode, "device": task.device}
    try:
        problem = Problem.from_file(task.problem_path)
    except ProblemError as exc:
        return ProblemRecord(problem=Path(task.problem_path).stem, status=INVALID_PROBLEM, message=str(exc), **base)
    start = time.perf_counter()
    try:
        if task.mode == EVAL:
            record = _score(task, problem, base)
        else:
            record = _optimize(task, problem, base)
    except ProblemError as exc:
        return ProblemRecord(problem=problem.name, status=INVALID_PROBLEM, message=str(exc), **base)
    except Exception as exc:  # the process boundary: log it, keep the traceback, retry it on resume
        log.exception("suite task %s failed inside the runner", task.key)
        return ProblemRecord(problem=problem.name, status=ERROR, message=f"{type(exc).__name__}: {exc}",
                             error=traceback.format_exc(limit=12), work_s=time.perf_counter() - start, **base)
    return _with_work(record, time.perf_counter() - start)


def _with_work(record: ProblemRecord, work_s: float) -> ProblemRecord:
    return replace(record, work_s=work_s)


def _score(task: SuiteTask, problem: Problem, base: dict[str, Any]) -> ProblemRecord:
    if task.candidate_path is None:
        return ProblemRecord(problem=problem.name, status=NO_CANDIDATE, message="no candidate kernel for this problem",
                             **base)
    from tritonsmith.evaluator import evaluate

    s = task.settings
    result = evaluate(problem, Path(task.candidate_path), device=s.device,  # type: ignore[arg-type]
                      trials=s.trials, tolerance=s.tolerance, policy=s.policy, scale=s.scale, timeout_s=s.eval_timeout_s)
    return ProblemRecord(problem=problem.name, status=result.status.value, message=result.message, result=result,
                         iterations=1, candidate_file=task.candidate_path, **base)


def _optimize(task: SuiteTask, problem: Problem, base: dict[str, Any]) -> ProblemRecord:
    s = task.settings
    fn = resolve_optimize_fn(s.optimize_fn)  # type: ignore[arg-type]
    if s.scale:
        problem = problem.scaled()
        base = {**base, "scaling_note": problem.scaling_note}
    check_reference(problem)  # as `tritonsmith eval` does, before any generation (raises ProblemError)
    settings: dict[str, Any] = {"trials": s.trials, "tolerance": s.tolerance, "policy": s.policy,
                                "use_memory": s.use_memory}
    if s.eval_timeout_s is not None:
        settings["eval_timeout_s"] = s.eval_timeout_s
    from tritonsmith.graphs import OptimizeInterrupted

    stopped = False
    try:
        raw = fn(problem, generator=generator_choice(s.generator), iterations=s.iterations, device=s.device, **settings)
    except OptimizeInterrupted as stop:  # the run's hard stop or Ctrl-C: keep the attempts that finished
        raw, stopped = stop.result, True
    out = to_outcome(raw)
    candidate_file = None
    if out.best_source is not None:
        candidate_file = f"kernels/{task.key}.py"
        write_atomic(Path(task.run_dir) / candidate_file, out.best_source)
    if out.best_result is None:
        status = out.failure_status or NO_CANDIDATE
        message = out.failure_message or f"{out.generator} produced no candidate in {out.iterations} iterations"
    else:
        status, message = out.best_result.status.value, out.best_result.message
    if stopped and out.best_source is not None:
        message = f"{message} (the run was stopped after {out.iterations} of {s.iterations} iterations)"
    elif stopped:  # the loop's own reason names Ctrl-C; here it was the run's stop, and a resume retries it
        n = len(out.attempts)
        status, message = STOPPED, (f"the run was stopped (its hard stop or Ctrl-C) after {n} finished attempt"
                                  f"{'s' if n != 1 else ''} and {out.iterations} of {s.iterations} iterations; "
                                  "a resume retries it")
    return ProblemRecord(problem=problem.name, status=status, message=message, result=out.best_result,
                         iterations=out.iterations, generator=out.generator, input_tokens=out.input_tokens,
                         output_tokens=out.output_tokens, cost_usd=out.cost_usd, candidate_file=candidate_file,
                         attempts=out.attempts, slower=out.slower, **base)


def resolve_optimize_fn(ref: str | None) -> Callable[..., Any]:
    """``"module:attr"`` -> that callable; ``None`` -> :func:`tritonsmith.graphs.optimize`."""
    if ref is None:
        from tritonsmith.graphs import optimize

        return optimize
    module_name, _, attr = ref.partition(":")
    if not attr:
        raise ValueError(f"optimize function reference must look like 'package.module:function', not {ref!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{ref} is not callable")
    return obj


def generator_choice(name: str | None) -> str | None:
    """The generator named on the command line; ``None``/``"default"`` lets the optimize loop choose."""
    return None if name in (None, "default") else name


def to_outcome(raw: Any) -> OptimizeOutcome:
    """Accept an :class:`OptimizeOutcome` or tritonsmith's ``OptimizeResult``."""
    if isinstance(raw, OptimizeOutcome):
        return raw
    return outcome_from_optimize_result(raw)
