"""The evaluator: is a Triton candidate correct under the policy in force, and how fast is it?

``evaluate`` is the one entry point; its verdict is what "verified" means everywhere in tritonsmith.
Inside: ``_evaluate`` (``evaluate``, ``prestart_worker``), ``_checks`` (static checks of the candidate's
source), ``_guards`` (run-time guards), ``_compare`` (tolerances), ``_errors`` (candidate failures),
``_trials`` (correctness on fresh inputs), ``_bench`` (timing) and ``sandbox/`` (the worker processes).

The profiler runs its own workers on this machinery: the last names of ``__all__`` are its public handle
on the evaluator's timing and input helpers. Importing this package loads nothing
heavy: each name is imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "CPU_TIMING_NOTE",
    "DEFAULT_POLICY",
    "POLICIES",
    "TOLERANCES",
    "EvalResult",
    "EvalStatus",
    "evaluate",
    "prestart_worker",
    "resolve_device",
    # the profiler's handle on the evaluator's worker helpers
    "FLUSH_BYTES",
    "CandidateFailure",
    "input_sets",
    "time_forward",
    "worker_env",
]

# public name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "CPU_TIMING_NOTE": ("tritonsmith.evaluator._evaluate", "CPU_TIMING_NOTE"),
    "DEFAULT_POLICY": ("tritonsmith.evaluator._checks", "DEFAULT_POLICY"),
    "POLICIES": ("tritonsmith.evaluator._checks", "POLICIES"),
    "TOLERANCES": ("tritonsmith.evaluator._compare", "TOLERANCES"),
    "EvalResult": ("tritonsmith.core.results", "EvalResult"),
    "EvalStatus": ("tritonsmith.core.results", "EvalStatus"),
    "evaluate": ("tritonsmith.evaluator._evaluate", "evaluate"),
    "prestart_worker": ("tritonsmith.evaluator._evaluate", "prestart_worker"),
    "resolve_device": ("tritonsmith.core.device", "resolve_device"),
    "FLUSH_BYTES": ("tritonsmith.evaluator._bench", "_FLUSH_BYTES"),
    "CandidateFailure": ("tritonsmith.evaluator._errors", "CandidateFailure"),
    "input_sets": ("tritonsmith.evaluator._bench", "_input_sets"),
    "time_forward": ("tritonsmith.evaluator._bench", "_time"),
    "worker_env": ("tritonsmith.evaluator._evaluate", "_worker_env"),
}

if TYPE_CHECKING:
    from tritonsmith.core.device import resolve_device
    from tritonsmith.core.results import EvalResult, EvalStatus
    from tritonsmith.evaluator._bench import _FLUSH_BYTES as FLUSH_BYTES
    from tritonsmith.evaluator._bench import _input_sets as input_sets
    from tritonsmith.evaluator._bench import _time as time_forward
    from tritonsmith.evaluator._checks import DEFAULT_POLICY, POLICIES
    from tritonsmith.evaluator._compare import TOLERANCES
    from tritonsmith.evaluator._errors import CandidateFailure
    from tritonsmith.evaluator._evaluate import CPU_TIMING_NOTE, evaluate, prestart_worker
    from tritonsmith.evaluator._evaluate import _worker_env as worker_env


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module 'tritonsmith.evaluator' has no attribute {name!r}")
