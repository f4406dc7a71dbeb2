"""The evaluator as a LangChain tool, for agents outside the graph (the graph calls ``evaluate`` itself).

    tool = make_evaluate_tool("softmax_reference.py", device="cpu")
    tool.invoke({"candidate_source": source})   # -> the evaluator's findings, as the model reads them

``evaluate_kernel_tool`` takes the reference too, for agents that juggle several problems.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool, StructuredTool

from tritonsmith.core.problem import ProblemError
from tritonsmith.tools.submit import bad_arguments

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem
    from tritonsmith.core.results import EvalResult

__all__ = ["evaluate_kernel_tool", "make_evaluate_tool"]

_DESCRIPTION = """\
Check a Triton candidate against the PyTorch reference, exactly as the final judge will: it runs the \
candidate on fresh random inputs and compares every output with the reference. Returns the status \
(correct, wrong_output, compile_error, runtime_error, timeout, crashed, rejected) and what to fix: the \
failing line, the first wrong element and its expected value, NaN/Inf counts; when correct on a GPU, its \
time against eager PyTorch and torch.compile. `candidate_source` is the COMPLETE Python file defining \
`class ModelNew(nn.Module)` whose forward launches @triton.jit kernels."""


def _run(problem: Problem | str | Path, candidate_source: str, *, device: str, trials: int,
         timeout_s: float | None) -> tuple[str, dict[str, object]]:
    from tritonsmith.evaluator import evaluate

    if not candidate_source.strip():
        return "status: invalid — candidate_source is empty; pass the whole file defining ModelNew", {}
    try:
        result: EvalResult = evaluate(problem, candidate_source, device=device, trials=trials,  # type: ignore[arg-type]
                                      timeout_s=timeout_s)
    except ProblemError as exc:  # the reference, not the candidate, is broken: the model cannot fix that
        return f"status: invalid — the reference problem is broken: {exc}", {}
    return result.feedback(), result.to_dict()


def make_evaluate_tool(problem: Problem | str | Path, *, device: str = "auto", trials: int = 3,
                       timeout_s: float | None = None) -> BaseTool:
    """A tool ``evaluate_kernel(candidate_source)`` bound to ``problem``; its artifact is the EvalResult dict."""

    def evaluate_kernel(candidate_source: str) -> tuple[str, dict[str, object]]:
        return _run(problem, candidate_source, device=device, trials=trials, timeout_s=timeout_s)

    return StructuredTool.from_function(evaluate_kernel, name="evaluate_kernel", description=_DESCRIPTION,
                                        response_format="content_and_artifact", handle_validation_error=bad_arguments)


def _evaluate_any(reference: str, candidate_source: str, device: str = "auto") -> tuple[str, dict[str, object]]:
    return _run(reference, candidate_source, device=device, trials=3, timeout_s=None)


evaluate_kernel_tool: BaseTool = StructuredTool.from_function(
    _evaluate_any, name="evaluate_kernel",
    description=_DESCRIPTION + " `reference` is the path of the KernelBench reference file (or its source); "
                               "`device` is auto, cuda or cpu (the interpreter: correctness only).",
    response_format="content_and_artifact", handle_validation_error=bad_arguments)
