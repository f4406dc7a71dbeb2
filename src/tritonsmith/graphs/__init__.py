"""The LangGraph refinement loop: ``build_kernel_graph``, ``compile_kernel_graph`` and ``optimize``.

Importing this package loads nothing heavy: the names below are imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "AUTO_BUILTIN_NOTE",
    "AttemptRecord",
    "ExtraNode",
    "FileCheckpointer",
    "RunFiles",
    "check_command",
    "check_script",
    "KernelState",
    "NODE_NAMES",
    "OptimizeInterrupted",
    "OptimizeResult",
    "build_kernel_graph",
    "compile_kernel_graph",
    "optimize",
    "reward_for",
]

_LAZY = {
    "AUTO_BUILTIN_NOTE": "tritonsmith.graphs._resolve",
    "FileCheckpointer": "tritonsmith.graphs._checkpoint",
    "RunFiles": "tritonsmith.graphs._checkpoint",
    "check_command": "tritonsmith.graphs._report",
    "check_script": "tritonsmith.graphs._report",
    "AttemptRecord": "tritonsmith.graphs.state",
    "ExtraNode": "tritonsmith.graphs.builder",
    "NODE_NAMES": "tritonsmith.graphs.nodes",
    "KernelState": "tritonsmith.graphs.state",
    "OptimizeInterrupted": "tritonsmith.graphs.optimizer",
    "OptimizeResult": "tritonsmith.graphs.optimizer",
    "build_kernel_graph": "tritonsmith.graphs.builder",
    "compile_kernel_graph": "tritonsmith.graphs.builder",
    "optimize": "tritonsmith.graphs.optimizer",
    "reward_for": "tritonsmith.graphs.reward",
}

if TYPE_CHECKING:
    from tritonsmith.graphs.builder import ExtraNode, build_kernel_graph, compile_kernel_graph
    from tritonsmith.graphs.nodes import NODE_NAMES
    from tritonsmith.graphs.optimizer import OptimizeInterrupted, OptimizeResult, optimize
    from tritonsmith.graphs.reward import reward_for
    from tritonsmith.graphs.state import AttemptRecord, KernelState


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith.graphs' has no attribute {name!r}")
