"""The LangChain tools: small typed functions whose docstrings are what a model reads.

    from tritonsmith.tools import make_evaluate_tool
    tool = make_evaluate_tool("softmax_reference.py", device="cpu")
    tool.invoke({"candidate_source": source})

One implementation per tool, one factory each (the LLM generator's ``ToolNode`` runs these same tools):
``evaluate_kernel`` (:func:`make_evaluate_tool`), ``profile_kernel`` (:func:`make_profile_tool`),
``kernel_search`` (:func:`make_kernel_search_tool`; the plain function :func:`search_kernels`),
``search_web`` (:func:`make_web_search_tool`; the plain function lives in the module ``web_search``,
which a package attribute of that name would shadow) and ``submit_kernel`` (:func:`make_submit_tool`).
``ports`` holds the small protocols through which the graph and the generators reach the evaluator, the
memory and the profiler; the tools accept those too (a store or profiler of one's own).
Importing this package loads nothing heavy: each name is imported on first use. The old factory names
(``profile_kernel_tool``, ``web_search_tool``, ``evaluate_kernel_tool``) still work, with a
``DeprecationWarning``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "EVALUATE_TOOL_NAME",
    "SUBMIT_TOOL_NAME",
    "KernelExample",
    "KernelSearchResult",
    "make_evaluate_tool",
    "make_kernel_search_tool",
    "make_profile_tool",
    "make_submit_tool",
    "make_web_search_tool",
    "search_kernels",
    "submit_kernel",
]

_LAZY = {
    "SUBMIT_TOOL_NAME": "tritonsmith.tools.submit",
    "make_submit_tool": "tritonsmith.tools.submit",
    "submit_kernel": "tritonsmith.tools.submit",
    "KernelExample": "tritonsmith.tools.kernel_search",
    "KernelSearchResult": "tritonsmith.tools.kernel_search",
    "make_kernel_search_tool": "tritonsmith.tools.kernel_search",
    "search_kernels": "tritonsmith.tools.kernel_search",
    "EVALUATE_TOOL_NAME": "tritonsmith.tools.evaluate_tool",
    "make_evaluate_tool": "tritonsmith.tools.evaluate_tool",
    "make_profile_tool": "tritonsmith.tools.profile",
    "make_web_search_tool": "tritonsmith.tools.web_search",
    # deprecated spellings (each warns when called, or here when it is a tool rather than a factory)
    "evaluate_kernel_tool": "tritonsmith.tools.evaluate_tool",
    "profile_kernel_tool": "tritonsmith.tools.profile",
    "web_search_tool": "tritonsmith.tools.web_search",
}

if TYPE_CHECKING:
    from tritonsmith.tools.evaluate_tool import EVALUATE_TOOL_NAME, make_evaluate_tool
    from tritonsmith.tools.kernel_search import (
        KernelExample,
        KernelSearchResult,
        make_kernel_search_tool,
        search_kernels,
    )
    from tritonsmith.tools.profile import make_profile_tool
    from tritonsmith.tools.submit import SUBMIT_TOOL_NAME, make_submit_tool, submit_kernel
    from tritonsmith.tools.web_search import make_web_search_tool


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith.tools' has no attribute {name!r}")
