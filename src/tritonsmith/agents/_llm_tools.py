"""Tools the LLM generator may call while writing a candidate, bound to the problem at hand."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, StructuredTool

from tritonsmith.tools.submit import SUBMIT_TOOL_NAME, bad_arguments, submit_kernel

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem
    from tritonsmith.tools.ports import KernelProfiler, KernelStore

__all__ = ["SUBMIT_TOOL_NAME", "kernel_search_tool", "profiler_tool", "submit_kernel"]

log = logging.getLogger(__name__)

def kernel_search_tool(store: KernelStore, *, k_max: int = 5) -> BaseTool:
    """``kernel_search(query, k)`` over any :class:`KernelStore`: verified kernels for similar problems."""

    def kernel_search(query: str, k: int = 3) -> str:
        hits = store.search_text(query, k=max(1, min(k, k_max)))
        if not hits:
            return "no verified kernels match that query"
        return "\n\n".join(f"### {h.problem_name} ({h.reason})\n```python\n{h.source.strip()}\n```" for h in hits)

    return StructuredTool.from_function(
        kernel_search, name="kernel_search",
        description=("Search the memory of verified Triton kernels. `query` is free text (an op such as "
                     "'row softmax', 'matmul + bias + relu', or PyTorch code); `k` kernels come back with "
                     "the problem each solved. Use it to find a proven structure to adapt."),
        handle_validation_error=bad_arguments)


def profiler_tool(problem: Problem, profiler: KernelProfiler, *, device: str) -> BaseTool:
    """``profile_kernel(candidate_source)``: run ``profiler`` on a candidate for the current problem."""

    def profile_kernel(candidate_source: str) -> str:
        findings = profiler(problem, candidate_source, device=device)
        return findings or "the profiler has nothing to report here (it needs a CUDA GPU for timings)"

    return StructuredTool.from_function(
        profile_kernel, name="profile_kernel",
        description=("Profile a complete candidate file (defining ModelNew) on the current problem: where "
                     "its time goes (memory vs compute, occupancy, launch overhead). Pass the whole file."),
        handle_validation_error=bad_arguments)


def web_search_tool() -> BaseTool | None:
    """``tritonsmith.tools.web_search``'s tool (trusted domains, bounded time), when that module is installed."""
    from tritonsmith.tools.ports import module_available

    if not module_available("tritonsmith.tools.web_search"):
        return None
    from tritonsmith.tools.web_search import web_search_tool as make

    return make()


def _search_tool(store: KernelStore, device_name: str | None) -> BaseTool:
    """The kernel-search tool: ``tritonsmith.tools.kernel_search``'s over a real memory, else ours."""
    from tritonsmith.tools.ports import MemoryStore, module_available

    if isinstance(store, MemoryStore) and module_available("tritonsmith.tools.kernel_search"):
        from tritonsmith.tools.kernel_search import make_kernel_search_tool

        return make_kernel_search_tool(store.memory, device_name=device_name)
    return kernel_search_tool(store)


def _profile_tool(problem: Problem, profiler: KernelProfiler, device: str) -> BaseTool:
    """The profiler tool: ``tritonsmith.tools.profile``'s for the default profiler, else one over ``profiler``."""
    from tritonsmith.tools.ports import is_default_profiler

    if is_default_profiler(profiler):
        from tritonsmith.tools.profile import profile_kernel_tool

        return profile_kernel_tool(problem, device=device)
    return profiler_tool(problem, profiler, device=device)


def default_toolkit(
    *, store: KernelStore | None, profiler: KernelProfiler | None, web_search: bool = True,
) -> Callable[[Any], Sequence[BaseTool]]:
    """A factory giving each request its tools: kernel search, profiler (bound to the problem), web search."""

    def tools_for(request: Any) -> list[BaseTool]:
        out: list[BaseTool] = []
        if store is not None:
            out.append(_search_tool(store, None))
        if profiler is not None:
            out.append(_profile_tool(request.problem, profiler, request.device))
        if web_search and (ws := web_search_tool()) is not None:
            out.append(ws)
        return out

    return tools_for
