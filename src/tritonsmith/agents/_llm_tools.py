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

__all__ = ["EVALUATE_TOOL_NAME", "SUBMIT_TOOL_NAME", "evaluator_tool", "kernel_search_tool", "profiler_tool",
           "submit_kernel"]

log = logging.getLogger(__name__)

def kernel_search_tool(store: KernelStore, *, k_max: int = 5) -> BaseTool:
    """``kernel_search(query, k)`` over any :class:`KernelStore`: verified kernels for similar problems."""

    def kernel_search(query: str, k: int = 3) -> str:
        """Search the memory of verified Triton kernels for a proven structure to adapt.

        Args:
            query: free text: an op such as 'row softmax' or 'matmul + bias + relu', or PyTorch code.
            k: how many kernels to return (1-5), each with the problem it solved.
        """
        hits = store.search_text(query, k=max(1, min(k, k_max)))
        if not hits:
            return "no verified kernels match that query"
        return "\n\n".join(f"### {h.problem_name} ({h.reason})\n```python\n{h.source.strip()}\n```" for h in hits)

    return StructuredTool.from_function(kernel_search, name="kernel_search", parse_docstring=True,
                                        handle_validation_error=bad_arguments)


def profiler_tool(problem: Problem, profiler: KernelProfiler, *, device: str) -> BaseTool:
    """``profile_kernel(candidate_source)``: run ``profiler`` on a candidate for the current problem."""

    def profile_kernel(candidate_source: str) -> str:
        """Profile a candidate on the current problem: where its time goes (memory vs compute, occupancy,
        launch overhead).

        Args:
            candidate_source: the complete Python file defining ModelNew.
        """
        findings = profiler(problem, candidate_source, device=device)
        return findings or "the profiler has nothing to report here (it needs a CUDA GPU for timings)"

    return StructuredTool.from_function(profile_kernel, name="profile_kernel", parse_docstring=True,
                                        handle_validation_error=bad_arguments)


EVALUATE_TOOL_NAME = "evaluate_kernel"


def evaluator_tool(problem: Problem, evaluate: Callable[..., Any], *, device: str, settings: dict[str, Any],
                   max_calls: int = 2) -> BaseTool:
    """``evaluate_kernel(candidate_source)``: the run's evaluator (same sandbox and rules) on a draft, one trial.

    At most ``max_calls`` drafts per candidate; each call is a tool call, so it spends a tool round too.
    """
    calls = 0

    def evaluate_kernel(candidate_source: str) -> str:
        """Check a draft before you submit it: the evaluator runs it in its sandbox under the same rules, on
        one trial of fresh random inputs, and says what is wrong (or that it passed that trial). Only
        `submit_kernel` counts as your answer; drafts are limited per iteration.

        Args:
            candidate_source: the complete Python file defining ModelNew.
        """
        nonlocal calls
        if calls >= max_calls:
            return f"evaluate_kernel is spent ({max_calls} drafts per iteration): submit your kernel"
        calls += 1
        result = evaluate(problem, candidate_source, device=device, **{**settings, "trials": 1})
        left = max_calls - calls
        return f"{result.feedback(limit=2000)}\n(draft check {calls}: one trial; {left} draft check(s) left)"

    return StructuredTool.from_function(evaluate_kernel, name=EVALUATE_TOOL_NAME, parse_docstring=True,
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
    evaluate: Callable[..., Any] | None = None, eval_settings: dict[str, Any] | None = None,
    max_evaluations: int = 2,
) -> Callable[[Any], Sequence[BaseTool]]:
    """A factory giving each request its tools: kernel search, profiler (bound to the problem), web search,
    and (with ``evaluate``) a bounded draft evaluator with the run's settings (``eval_settings``: the
    evaluator's keywords besides problem, candidate, device and trials)."""

    def tools_for(request: Any) -> list[BaseTool]:
        out: list[BaseTool] = []
        if evaluate is not None and max_evaluations > 0:
            settings = {**(eval_settings or {}), "policy": getattr(request, "policy", "hybrid")}
            out.append(evaluator_tool(request.problem, evaluate, device=request.device, settings=settings,
                                      max_calls=max_evaluations))
        if store is not None:
            out.append(_search_tool(store, None))
        if profiler is not None:
            out.append(_profile_tool(request.problem, profiler, request.device))
        if web_search and (ws := web_search_tool()) is not None:
            out.append(ws)
        return out

    return tools_for
