"""The tools' public API: one factory per tool (``make_<name>_tool``), the same tools the LLM generator's
ToolNode runs, and the old names still working with a DeprecationWarning."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import tritonsmith.tools as tools
from tritonsmith.core.problem import Problem, ProblemError
from tritonsmith.core.results import EvalResult, EvalStatus
from tritonsmith.tools.ports import RetrievedKernel

CANDIDATE = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


class _Evaluator:
    """Records each call's keywords; wrong output on the first call, correct after."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, problem: Any, candidate: str, **kwargs: Any) -> EvalResult:
        self.calls.append({"problem": problem, "candidate": candidate, **kwargs})
        status = EvalStatus.WRONG_OUTPUT if len(self.calls) == 1 else EvalStatus.CORRECT
        return EvalResult(status=status, message=f"call {len(self.calls)}", problem="p", device=kwargs["device"],
                          device_name="cpu", tolerance="fp32")


class _Store:
    def __init__(self) -> None:
        self.queries: list[tuple[str, int]] = []

    def similar(self, problem: Any, *, k: int, device_name: str | None = None) -> list[RetrievedKernel]:
        return []

    def search_text(self, query: str, *, k: int) -> list[RetrievedKernel]:
        self.queries.append((query, k))
        return [RetrievedKernel(problem_name="rowsum_41", source="def _rowsum_kernel(): ...\n" * 3,
                                reason="same reduction", record_id="abc123def456789")]

    def remember(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_every_public_name_resolves_and_every_factory_is_make_name_tool() -> None:
    for name in tools.__all__:
        assert getattr(tools, name) is not None, name
    factories = sorted(n for n in tools.__all__ if n.endswith("_tool"))
    assert factories == ["make_evaluate_tool", "make_kernel_search_tool", "make_profile_tool", "make_submit_tool",
                         "make_web_search_tool"]
    assert tools.make_submit_tool() is tools.submit_kernel and tools.submit_kernel.name == tools.SUBMIT_TOOL_NAME


def test_the_draft_evaluate_tool_is_bounded_and_passes_the_runs_settings(softmax_reference: Path) -> None:
    judge = _Evaluator()
    problem = Problem.from_file(softmax_reference)
    tool = tools.make_evaluate_tool(problem, device="cpu", evaluator=judge, max_calls=2,
                                    options={"tolerance": "fp16", "policy": "strict", "timeout_s": 7.0})
    assert tool.name == "evaluate_kernel" and "Check a draft" in tool.description
    first = tool.invoke({"candidate_source": CANDIDATE})
    assert "wrong_output" in first and "draft check 1: one trial; 1 draft check(s) left" in first
    assert "draft check 2: one trial; 0 draft check(s) left" in tool.invoke({"candidate_source": CANDIDATE})
    assert "evaluate_kernel is spent (2 drafts per iteration)" in tool.invoke({"candidate_source": CANDIDATE})
    assert len(judge.calls) == 2
    assert judge.calls[0] == {"problem": problem, "candidate": CANDIDATE, "device": "cpu", "trials": 1,
                              "tolerance": "fp16", "policy": "strict", "timeout_s": 7.0}


def test_the_evaluate_tool_reports_empty_sources_and_broken_references_as_messages() -> None:
    judge = _Evaluator()
    tool = tools.make_evaluate_tool("no_such_reference_93.py", device="cpu", evaluator=judge, trials=2)
    assert "candidate_source is empty" in tool.invoke({"candidate_source": "  \n"}) and judge.calls == []

    def broken(problem: Any, candidate: str, **kwargs: Any) -> EvalResult:
        raise ProblemError("Model has no forward")

    bad = tools.make_evaluate_tool("ref.py", evaluator=broken)
    assert "the reference problem is broken: Model has no forward" in bad.invoke({"candidate_source": CANDIDATE})
    with pytest.raises(ValueError, match="max_calls"):
        tools.make_evaluate_tool("ref.py", max_calls=0)


def test_without_a_problem_the_evaluate_tool_takes_the_reference(softmax_reference: Path) -> None:
    judge = _Evaluator()
    tool = tools.make_evaluate_tool(evaluator=judge, trials=3)
    assert {"reference", "candidate_source", "device"} <= set(tool.args)
    call = {"name": "evaluate_kernel", "id": "c7", "type": "tool_call",
            "args": {"reference": str(softmax_reference), "candidate_source": CANDIDATE, "device": "cpu"}}
    message = tool.invoke(call)
    assert "wrong_output" in message.content and message.artifact["status"] == "wrong_output"
    assert judge.calls[0]["problem"] == str(softmax_reference) and judge.calls[0]["trials"] == 3


def test_the_profile_tool_runs_any_profiler_on_the_loaded_problem(softmax_reference: Path) -> None:
    seen: list[tuple[Any, str, str]] = []

    def profiler(problem: Problem, source: str, *, device: str) -> str | None:
        seen.append((problem, source, device))
        return None if len(seen) == 1 else "memory-bound at 71% of peak bandwidth"

    tool = tools.make_profile_tool(softmax_reference, profiler=profiler, device="cpu")
    assert "nothing to report" in tool.invoke({"candidate_source": CANDIDATE})
    assert tool.invoke({"candidate_source": CANDIDATE}) == "memory-bound at 71% of peak bandwidth"
    assert isinstance(seen[0][0], Problem) and seen[0][0].name == "softmax_reference" and seen[0][2] == "cpu"
    missing = tools.make_profile_tool("no_such_reference_93.py", profiler=profiler)
    assert "cannot profile" in missing.invoke({"candidate_source": CANDIDATE}) and len(seen) == 2


def test_kernel_search_over_a_store_of_ones_own() -> None:
    store = _Store()
    tool = tools.make_kernel_search_tool(store)
    out = tool.invoke({"query": "row sum", "k": 2})
    assert store.queries == [("row sum", 2)]
    assert "### Example 1: rowsum_41 [abc123def456]" in out and "why: same reduction" in out
    assert "k must be between 1 and 20" in tool.invoke({"query": "row sum", "k": 21}) and len(store.queries) == 1


def test_the_llm_toolkit_is_made_of_the_public_tools(softmax_reference: Path) -> None:
    from tritonsmith.agents import GenerationRequest, default_toolkit

    judge, store = _Evaluator(), _Store()
    request = GenerationRequest(problem=Problem.from_file(softmax_reference), iteration=1, device="cpu")
    made = default_toolkit(store=store, profiler=lambda p, s, *, device: "bound by memory", evaluate=judge,
                           eval_settings={"tolerance": "fp32"}, max_evaluations=1)(request)
    by_name = {t.name: t for t in made}
    assert set(by_name) == {"evaluate_kernel", "kernel_search", "profile_kernel", "search_web"}
    assert "draft check 1: one trial; 0 draft check(s) left" in by_name["evaluate_kernel"].invoke(
        {"candidate_source": CANDIDATE})
    assert judge.calls[0]["policy"] == request.policy and judge.calls[0]["tolerance"] == "fp32"
    assert "rowsum_41" in by_name["kernel_search"].invoke({"query": "sum"})
    assert by_name["profile_kernel"].invoke({"candidate_source": CANDIDATE}) == "bound by memory"


def test_old_names_still_work_and_warn(softmax_reference: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from tritonsmith.agents import _llm_tools
    from tritonsmith.tools import kernel_search

    monkeypatch.setenv("TRITONSMITH_MEMORY_DIR", str(tmp_path / "store"))
    problem = Problem.from_file(softmax_reference)
    olds = {
        "profile_kernel_tool": lambda: tools.profile_kernel_tool(problem, device="cpu"),
        "web_search_tool": lambda: tools.web_search_tool(),
        "evaluate_kernel_tool": lambda: tools.evaluate_kernel_tool,
        "kernel_search_tool": lambda: kernel_search.kernel_search_tool,
        "agents kernel_search_tool": lambda: _llm_tools.kernel_search_tool(_Store()),
        "profiler_tool": lambda: _llm_tools.profiler_tool(problem, lambda p, s, *, device: None, device="cpu"),
        "evaluator_tool": lambda: _llm_tools.evaluator_tool(problem, _Evaluator(), device="cpu", settings={}),
    }
    expected = {"profile_kernel_tool": "profile_kernel", "web_search_tool": "search_web",
                "evaluate_kernel_tool": "evaluate_kernel", "kernel_search_tool": "kernel_search",
                "agents kernel_search_tool": "kernel_search", "profiler_tool": "profile_kernel",
                "evaluator_tool": "evaluate_kernel"}
    for old, make in olds.items():
        with pytest.warns(DeprecationWarning, match="deprecated; use .*make_"):
            tool = make()
        assert tool.name == expected[old], old
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tools.make_profile_tool(problem, device="cpu")
        tools.make_web_search_tool()
        tools.make_evaluate_tool()
