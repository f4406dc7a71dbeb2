"""tritonsmith: turn PyTorch reference code into fast, verified Triton GPU kernels.

Importing the package is cheap: torch, triton and langgraph load only when a function needs them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tritonsmith.core.version import __version__  # noqa: F401  (re-exported: tritonsmith.__version__)

__all__ = [
    "Attempt",
    "KernelContext",
    "Settings",
    "build_kernel_graph",
    "compile_kernel_graph",
    "optimize",
    "EvalResult",
    "EvalStatus",
    "Problem",
    "ProblemError",
    "evaluate",
    "load_problem",
]

_LAZY = {
    "Attempt": "tritonsmith.core.results",
    "KernelContext": "tritonsmith.core.settings",
    "Settings": "tritonsmith.core.settings",
    "build_kernel_graph": "tritonsmith.graphs.builder",
    "compile_kernel_graph": "tritonsmith.graphs.builder",
    "optimize": "tritonsmith.graphs.optimizer",
    "EvalResult": "tritonsmith.core.results",
    "EvalStatus": "tritonsmith.core.results",
    "Problem": "tritonsmith.core.problem",
    "ProblemError": "tritonsmith.core.problem",
    "evaluate": "tritonsmith.evaluator",
    "load_problem": "tritonsmith.core.problem",
}

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem, ProblemError, load_problem
    from tritonsmith.core.results import Attempt, EvalResult, EvalStatus
    from tritonsmith.core.settings import KernelContext, Settings
    from tritonsmith.evaluator import evaluate
    from tritonsmith.graphs.builder import build_kernel_graph, compile_kernel_graph
    from tritonsmith.graphs.optimizer import optimize


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith' has no attribute {name!r}")
