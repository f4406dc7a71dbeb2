"""The tools the LLM generator offers each request: the public tools of :mod:`tritonsmith.tools`, bound to the
problem at hand and to the run's evaluator, memory and profiler (one implementation per tool)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool

from tritonsmith.core.deprecation import warn_deprecated
from tritonsmith.tools import (
    EVALUATE_TOOL_NAME,
    SUBMIT_TOOL_NAME,
    make_evaluate_tool,
    make_kernel_search_tool,
    make_profile_tool,
    make_web_search_tool,
    submit_kernel,
)

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem
    from tritonsmith.tools.ports import KernelProfiler, KernelStore

__all__ = ["EVALUATE_TOOL_NAME", "SUBMIT_TOOL_NAME", "default_toolkit", "submit_kernel"]

log = logging.getLogger(__name__)


def default_toolkit(
    *, store: KernelStore | None, profiler: KernelProfiler | None, web_search: bool = True,
    evaluate: Callable[..., Any] | None = None, eval_settings: dict[str, Any] | None = None,
    max_evaluations: int = 2,
) -> Callable[[Any], Sequence[BaseTool]]:
    """A factory giving each request its tools: kernel search, profiler (bound to the problem), web search,
    and (with ``evaluate``) a bounded draft evaluator with the run's settings (``eval_settings``: the
    evaluator's keywords besides problem, candidate, device and trials)."""

    def tools_for(request: Any) -> list[BaseTool]:
        out: list[BaseTool] = []
        if evaluate is not None and max_evaluations > 0:
            options = {**(eval_settings or {}), "policy": getattr(request, "policy", "hybrid")}
            out.append(make_evaluate_tool(request.problem, device=request.device, evaluator=evaluate,
                                          options=options, max_calls=max_evaluations))
        if store is not None:
            out.append(make_kernel_search_tool(store))
        if profiler is not None:
            out.append(make_profile_tool(request.problem, profiler=profiler, device=request.device))
        if web_search:
            out.append(make_web_search_tool())
        return out

    return tools_for


# -- deprecated spellings (the tools' old private copies) -------------------------------------------------
def kernel_search_tool(store: KernelStore, **_: Any) -> BaseTool:
    """Deprecated: :func:`tritonsmith.tools.make_kernel_search_tool` (same store)."""
    warn_deprecated("kernel_search_tool", "tritonsmith.tools.make_kernel_search_tool")
    return make_kernel_search_tool(store)


def profiler_tool(problem: Problem, profiler: KernelProfiler, *, device: str) -> BaseTool:
    """Deprecated: :func:`tritonsmith.tools.make_profile_tool` (``profiler=``)."""
    warn_deprecated("profiler_tool", "tritonsmith.tools.make_profile_tool")
    return make_profile_tool(problem, profiler=profiler, device=device)


def evaluator_tool(problem: Problem, evaluate: Callable[..., Any], *, device: str, settings: dict[str, Any],
                   max_calls: int = 2) -> BaseTool:
    """Deprecated: :func:`tritonsmith.tools.make_evaluate_tool` (``evaluator=``, ``options=``, ``max_calls=``)."""
    warn_deprecated("evaluator_tool", "tritonsmith.tools.make_evaluate_tool")
    return make_evaluate_tool(problem, device=device, evaluator=evaluate, options=settings, max_calls=max_calls)


def web_search_tool() -> BaseTool:
    """Deprecated: :func:`tritonsmith.tools.make_web_search_tool`."""
    warn_deprecated("tritonsmith.agents._llm_tools.web_search_tool", "tritonsmith.tools.make_web_search_tool")
    return make_web_search_tool()
