"""The profiler as a LangChain tool: the model passes a candidate and reads where its time goes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool, StructuredTool

from tritonsmith.core.problem import ProblemError
from tritonsmith.profiler import profile as profile_module

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem

__all__ = ["profile_kernel_tool"]


def profile_kernel_tool(problem: Problem | str | Path, *, device: str = "auto", ncu: bool = True) -> BaseTool:
    """A LangChain tool bound to ``problem``: the model passes candidate source and reads the summary."""

    def profile_candidate(candidate_source: str = "") -> str:
        """Profile a Triton candidate on this problem: time vs the speed of light, the bound (memory or
        compute), per-kernel time, registers/spills/shared memory of each Triton kernel, hardware counters,
        and the next thing to try.

        Args:
            candidate_source: the complete Python file defining ModelNew; empty profiles the reference.
        """
        try:  # looked up at call time: a suite worker wraps profile_kernel in the GPU lock
            report = profile_module.profile_kernel(problem, candidate_source or None, device=device, ncu=ncu)
        except ProblemError as exc:
            return f"cannot profile: {exc}"
        return report.feedback()

    return StructuredTool.from_function(profile_candidate, name="profile_kernel", parse_docstring=True)
