"""The profiler as a LangChain tool: the model passes a candidate and reads where its time goes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool, StructuredTool

from tritonsmith.core.deprecation import deprecated_alias
from tritonsmith.core.problem import Problem, ProblemError, load_problem
from tritonsmith.tools.ports import default_profiler
from tritonsmith.tools.submit import bad_arguments

if TYPE_CHECKING:
    from tritonsmith.tools.ports import KernelProfiler

__all__ = ["NOTHING_TO_REPORT", "make_profile_tool"]

NOTHING_TO_REPORT = "the profiler has nothing to report here (it needs a CUDA GPU for timings)"


def make_profile_tool(problem: Problem | str | Path, *, profiler: KernelProfiler | None = None,
                      device: str = "auto", ncu: bool = True) -> BaseTool:
    """A LangChain tool ``profile_kernel(candidate_source)`` bound to ``problem``: the model passes candidate
    source and reads the summary.

    ``profiler``: any :class:`~tritonsmith.tools.ports.KernelProfiler` (the graph's port); None is
    :func:`~tritonsmith.profiler.profile_kernel` (with hardware counters when ``ncu``), which also
    profiles the reference when the source is empty and accepts the problem as a path.
    """
    run = profiler if profiler is not None else default_profiler(ncu=ncu)

    def profile_candidate(candidate_source: str = "") -> str:
        """Profile a Triton candidate on this problem: time vs the speed of light, the bound (memory or
        compute), per-kernel time, registers/spills/shared memory of each Triton kernel, hardware counters,
        and the next thing to try.

        Args:
            candidate_source: the complete Python file defining ModelNew; empty profiles the reference.
        """
        try:
            target = problem if profiler is None else load_problem(problem)
            findings = run(target, candidate_source, device=device)  # type: ignore[arg-type]
        except ProblemError as exc:
            return f"cannot profile: {exc}"
        return findings or NOTHING_TO_REPORT

    return StructuredTool.from_function(profile_candidate, name="profile_kernel", parse_docstring=True,
                                        handle_validation_error=bad_arguments)


profile_kernel_tool = deprecated_alias("profile_kernel_tool", make_profile_tool)
