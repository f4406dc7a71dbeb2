"""The evaluator as a LangChain tool: for agents outside the graph, and for the LLM generator's drafts.

    tool = make_evaluate_tool("softmax_reference.py", device="cpu")
    tool.invoke({"candidate_source": source})   # -> the evaluator's findings, as the model reads them

Without a problem the tool takes the reference too (``reference``, ``device``), for agents that juggle
several problems. With ``max_calls`` it is the LLM generator's bounded draft check: the run's evaluator
(``evaluator``, its settings in ``options``) on one trial, at most ``max_calls`` times per candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, StructuredTool

from tritonsmith.core.deprecation import warn_deprecated
from tritonsmith.core.problem import ProblemError
from tritonsmith.tools.ports import default_evaluator
from tritonsmith.tools.submit import bad_arguments

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem
    from tritonsmith.tools.ports import Evaluator

__all__ = ["EVALUATE_TOOL_NAME", "make_evaluate_tool"]

EVALUATE_TOOL_NAME = "evaluate_kernel"

_DESCRIPTION = """\
Check a Triton candidate against the PyTorch reference, exactly as the final judge will: it runs the \
candidate on fresh random inputs and compares every output with the reference. Returns the status \
(correct, wrong_output, compile_error, runtime_error, timeout, crashed, rejected) and what to fix: the \
failing line, the first wrong element and its expected value, NaN/Inf counts; when correct on a GPU, its \
time against eager PyTorch and torch.compile. `candidate_source` is the COMPLETE Python file defining \
`class ModelNew(nn.Module)` whose forward launches @triton.jit kernels."""

_ANY_REFERENCE = (" `reference` is the path of the KernelBench reference file (or its source); "
                  "`device` is auto, cuda or cpu (the interpreter: correctness only).")

_DRAFT_DESCRIPTION = """\
Check a draft before you submit it: the evaluator runs it in its sandbox under the same rules, on one \
trial of fresh random inputs, and says what is wrong (or that it passed that trial). Only \
`submit_kernel` counts as your answer; drafts are limited per iteration."""


def make_evaluate_tool(problem: Problem | str | Path | None = None, *, device: str = "auto", trials: int = 3,
                       timeout_s: float | None = None, evaluator: Evaluator | None = None,
                       options: Mapping[str, Any] | None = None, max_calls: int | None = None) -> BaseTool:
    """A tool ``evaluate_kernel(candidate_source)`` bound to ``problem``; its artifact is the EvalResult dict.

    Args:
        problem: the reference (a Problem, a path or its source); None: the tool takes ``reference`` and
            ``device`` as arguments too.
        device, trials, timeout_s: the evaluator's (``trials`` is 1 for a bounded draft check).
        evaluator: any :class:`~tritonsmith.tools.ports.Evaluator`; None: :func:`tritonsmith.evaluator.evaluate`.
        options: the evaluator's other keywords (tolerance, policy, scale, ...).
        max_calls: None, or the draft checks allowed (each answer then says how many are left).
    """
    if max_calls is not None and max_calls < 1:
        raise ValueError(f"max_calls must be None or >= 1, got {max_calls}")
    judge = evaluator if evaluator is not None else default_evaluator()
    kwargs: dict[str, Any] = {"timeout_s": timeout_s, **(options or {}), "trials": 1 if max_calls else trials}
    limit = 2000 if max_calls else 2500
    calls = 0

    def run(reference: Problem | str | Path, candidate_source: str, on: str) -> tuple[str, dict[str, object]]:
        nonlocal calls
        if not candidate_source.strip():
            return "status: invalid — candidate_source is empty; pass the whole file defining ModelNew", {}
        if max_calls is not None and calls >= max_calls:
            return f"{EVALUATE_TOOL_NAME} is spent ({max_calls} drafts per iteration): submit your kernel", {}
        calls += 1
        try:
            result = judge(reference, candidate_source, device=on, **kwargs)  # type: ignore[arg-type]
        except ProblemError as exc:  # the reference, not the candidate, is broken: the model cannot fix that
            return f"status: invalid — the reference problem is broken: {exc}", {}
        text = result.feedback(limit=limit)
        if max_calls is not None:
            text += f"\n(draft check {calls}: one trial; {max_calls - calls} draft check(s) left)"
        return text, result.to_dict()

    if problem is None:
        def evaluate_any(reference: str, candidate_source: str, device: str = device) -> tuple[str, dict[str, object]]:
            """Evaluate a candidate against any reference.

            Args:
                reference: the path of the KernelBench reference file, or its source.
                candidate_source: the complete Python file defining ModelNew.
                device: auto, cuda or cpu.
            """
            return run(reference, candidate_source, device)

        return StructuredTool.from_function(evaluate_any, name=EVALUATE_TOOL_NAME, parse_docstring=True,
                                            description=_DESCRIPTION + _ANY_REFERENCE,
                                            response_format="content_and_artifact",
                                            handle_validation_error=bad_arguments)

    def evaluate_kernel(candidate_source: str) -> tuple[str, dict[str, object]]:
        """Evaluate a candidate against this problem.

        Args:
            candidate_source: the complete Python file defining ModelNew.
        """
        return run(problem, candidate_source, device)

    return StructuredTool.from_function(evaluate_kernel, name=EVALUATE_TOOL_NAME, parse_docstring=True,
                                        description=_DRAFT_DESCRIPTION if max_calls else _DESCRIPTION,
                                        response_format="content_and_artifact", handle_validation_error=bad_arguments)


def __getattr__(name: str) -> Any:
    if name == "evaluate_kernel_tool":  # deprecated: was a module-level tool taking the reference
        warn_deprecated("evaluate_kernel_tool", "make_evaluate_tool()")
        return make_evaluate_tool()
    raise AttributeError(name)
