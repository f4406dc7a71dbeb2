"""Where candidate code runs: worker processes forked from a zygote that has imported torch and triton.

``run_worker`` runs the evaluation worker on a spec; ``run_module`` runs another worker module (the
profiler's) the same way; ``prestart`` starts a zygote ahead of time. The worker's loading helpers
(``Job``, ``build_models``, ``input_factory``, ``load_candidate``, ``call_candidate``) are shared with the
profiler's workers. Importing this package loads nothing heavy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "Job",
    "WorkerOutcome",
    "build_models",
    "call_candidate",
    "input_factory",
    "load_candidate",
    "prestart",
    "run_module",
    "run_worker",
]

_LAZY = {
    "WorkerOutcome": "tritonsmith.evaluator.sandbox._sandbox",
    "prestart": "tritonsmith.evaluator.sandbox._sandbox",
    "run_module": "tritonsmith.evaluator.sandbox._sandbox",
    "run_worker": "tritonsmith.evaluator.sandbox._sandbox",
    "Job": "tritonsmith.evaluator.sandbox._worker",
    "build_models": "tritonsmith.evaluator.sandbox._worker",
    "call_candidate": "tritonsmith.evaluator._calls",
    "input_factory": "tritonsmith.evaluator.sandbox._worker",
    "load_candidate": "tritonsmith.evaluator.sandbox._worker",
}

if TYPE_CHECKING:
    from tritonsmith.evaluator.sandbox._sandbox import WorkerOutcome, prestart, run_module, run_worker
    from tritonsmith.evaluator._calls import call_candidate
    from tritonsmith.evaluator.sandbox._worker import Job, build_models, input_factory, load_candidate


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith.evaluator.sandbox' has no attribute {name!r}")
