"""The LangChain tools: small typed functions whose docstrings are what a model reads.

    from tritonsmith.tools import make_evaluate_tool
    tool = make_evaluate_tool("softmax_reference.py", device="cpu")
    tool.invoke({"candidate_source": source})

``evaluate_kernel`` (``make_evaluate_tool`` bound to a problem, ``evaluate_kernel_tool`` for any),
``profile_kernel`` (``profile_kernel_tool``), ``kernel_search`` (``make_kernel_search_tool``,
``search_kernels``), ``web_search`` (``web_search_tool``; the plain functions live in the modules of the same names,
which a package attribute of that name would shadow) and ``submit_kernel``. ``ports`` holds the small
protocols through which the graph and the generators reach the evaluator, the memory and the profiler.
Importing this package loads nothing heavy: each name is imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "SUBMIT_TOOL_NAME",
    "KernelExample",
    "KernelSearchResult",
    "evaluate_kernel_tool",
    "make_evaluate_tool",
    "make_kernel_search_tool",
    "profile_kernel_tool",
    "search_kernels",
    "submit_kernel",
    "web_search_tool",
]

_LAZY = {
    "SUBMIT_TOOL_NAME": "tritonsmith.tools.submit",
    "submit_kernel": "tritonsmith.tools.submit",
    "KernelExample": "tritonsmith.tools.kernel_search",
    "KernelSearchResult": "tritonsmith.tools.kernel_search",
    "make_kernel_search_tool": "tritonsmith.tools.kernel_search",
    "search_kernels": "tritonsmith.tools.kernel_search",
    "evaluate_kernel_tool": "tritonsmith.tools.evaluate_tool",
    "make_evaluate_tool": "tritonsmith.tools.evaluate_tool",
    "profile_kernel_tool": "tritonsmith.tools.profile",
    "web_search_tool": "tritonsmith.tools.web_search",
}

if TYPE_CHECKING:
    from tritonsmith.tools.evaluate_tool import evaluate_kernel_tool, make_evaluate_tool
    from tritonsmith.tools.kernel_search import (
        KernelExample,
        KernelSearchResult,
        make_kernel_search_tool,
        search_kernels,
    )
    from tritonsmith.tools.profile import profile_kernel_tool
    from tritonsmith.tools.submit import SUBMIT_TOOL_NAME, submit_kernel
    from tritonsmith.tools.web_search import web_search_tool


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith.tools' has no attribute {name!r}")
