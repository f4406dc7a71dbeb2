"""Suite runs: the optimize loop (or given kernels) over many problems, many GPUs, resumably, with reports.

``run_suite`` runs, on one :class:`SuiteSettings`; ``build_report``/``write_report`` summarise a run directory; ``compare_runs`` sets
two side by side. The CLI's ``tritonsmith bench`` and ``tritonsmith report`` sit on these.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "OptimizeFn",
    "OptimizeOutcome",
    "ProblemRecord",
    "RunStore",
    "SuiteProblem",
    "SuiteRun",
    "SuiteSettings",
    "build_report",
    "compare_runs",
    "discover_problems",
    "match_candidates",
    "run_suite",
    "write_report",
]

_LAZY = {
    "OptimizeFn": "tritonsmith.suite.runner",
    "OptimizeOutcome": "tritonsmith.suite.runner",
    "SuiteProblem": "tritonsmith.suite.runner",
    "SuiteRun": "tritonsmith.suite.runner",
    "SuiteSettings": "tritonsmith.suite.settings",
    "discover_problems": "tritonsmith.suite.runner",
    "match_candidates": "tritonsmith.suite.runner",
    "run_suite": "tritonsmith.suite.runner",
    "ProblemRecord": "tritonsmith.suite.results",
    "RunStore": "tritonsmith.suite.results",
    "build_report": "tritonsmith.suite.report",
    "compare_runs": "tritonsmith.suite.report",
    "write_report": "tritonsmith.suite.report",
}

if TYPE_CHECKING:
    from tritonsmith.suite.report import build_report, compare_runs, write_report
    from tritonsmith.suite.results import ProblemRecord, RunStore
    from tritonsmith.suite.settings import SuiteSettings
    from tritonsmith.suite.runner import (
        OptimizeFn,
        OptimizeOutcome,
        SuiteProblem,
        SuiteRun,
        discover_problems,
        match_candidates,
        run_suite,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith.suite' has no attribute {name!r}")
