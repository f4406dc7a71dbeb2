"""The refinement loop end to end with a scripted tool-calling model and the real evaluator (CPU interpreter)."""

from __future__ import annotations

import logging

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from tritonsmith.agents.llm import LLMConfigurationError
from tritonsmith.core.problem import Problem
from tritonsmith.evaluator._evaluate import evaluate
from tritonsmith.graphs import compile_kernel_graph, optimize
from tritonsmith.graphs.testing import ScriptedChatModel, call_tool, reply, submit
from tritonsmith.memory import InMemoryKernelMemory, record_from_eval

RUN = {"device": "cpu", "trials": 1, "memory": False}


def _last_human(model: ScriptedChatModel, call: int) -> str:
    return [m for m in model.seen[call] if isinstance(m, HumanMessage)][-1].content  # type: ignore[return-value]


def _last_input(model: ScriptedChatModel, call: int) -> str:
    """What the model read last before answering call ``call``: a user message or a tool result."""
    return str(model.seen[call][-1].content)


def test_success_on_first_try_records_tokens_and_streams_events(softmax_reference, softmax_candidate):
    model = ScriptedChatModel(script=[submit(softmax_candidate, notes="one row per program")])
    events: list[dict[str, Any]] = []
    result = optimize(softmax_reference, model=model, on_event=events.append, **RUN)
    assert result.ok and result.status == "verified"
    assert result.best_source == softmax_candidate.strip("\n") + "\n"
    assert result.best_result is not None and result.best_result.ok
    assert result.rewards == (0.5,) and result.attempts[0].reward_basis == "unmeasured"
    assert result.generator == "llm" and model.remaining == 0
    assert result.input_tokens == 100 and result.output_tokens > 100 and result.cost_usd is None
    assert [e["event"] for e in events] == ["analyzed", "generated", "evaluated", "profiled", "decided",
                                            "remembered"]  # no memory: retrieve stays silent
    evaluated = [e for e in events if e["event"] == "evaluated"]
    assert evaluated == [{"event": "evaluated", "iteration": 1, "generator": "llm", "status": "correct",
                          "message": "correct on 1 trials", "speedup": None, "reward": 0.5,
                          "reward_basis": "unmeasured", "torch_ops": []}]
    assert any("reward 0.5" in n for n in result.notes)
    # the first prompt carries the problem, its analysis and the interpreter's facts
    first = _last_human(model, 0)
    assert "torch.softmax(x, dim=1)" in first and "memory-bound" in first and "interpreter" in first


def test_wrong_kernel_is_fixed_on_refinement(softmax_reference, softmax_candidate, wrong_candidate):
    model = ScriptedChatModel(script=[submit(wrong_candidate), reply(f"Fixed:\n```python\n{softmax_candidate}```")])
    result = optimize(softmax_reference, model=model, input_cost_per_mtok=2.0, output_cost_per_mtok=8.0, **RUN)
    assert [a.status for a in result.attempts] == ["wrong_output", "correct"]
    assert result.rewards == (0.0, 0.5) and result.best_iteration == 2
    # refinement continues the model's conversation: its own wrong kernel is there, the verdict answers it
    conversation = model.seen[1]
    assert "(tl.sum(num, axis=0) + 1.0)" in str(conversation[-2].content) + str(conversation[-2].tool_calls)
    verdict = _last_input(model, 1)
    assert "The evaluator's verdict on your iteration 1 (wrong_output)" in verdict
    assert "first bad index" in verdict and "iterations left after this one: 1" in verdict
    expected = (result.input_tokens * 2.0 + result.output_tokens * 8.0) / 1e6
    assert result.cost_usd == pytest.approx(expected)


def test_compile_error_is_fed_back(softmax_reference, softmax_candidate, syntax_error_candidate):
    model = ScriptedChatModel(script=[submit(syntax_error_candidate), submit(softmax_candidate)])
    result = optimize(softmax_reference, model=model, **RUN)
    assert [a.status for a in result.attempts] == ["compile_error", "correct"]
    second = _last_input(model, 1)
    assert "compile_error" in second and "SyntaxError" in second and "did not compile" in second


def test_model_that_never_submits_code_gives_up_with_the_reason(softmax_reference):
    chatter = [reply("Softmax is a classic memory-bound op; I would use one program per row.")] * 9
    model = ScriptedChatModel(script=chatter)
    result = optimize(softmax_reference, model=model, iterations=3, **RUN)
    assert result.status == "gave_up" and result.best_source is None
    assert [a.status for a in result.attempts] == ["no_code"] * 3 and result.rewards == (0.0, 0.0, 0.0)
    assert "iteration limit reached (3/3) without a verified kernel" in result.reason
    assert "gave no code in 3 answers" in result.attempts[0].message
    # within one candidate, the answer without code was fed back as such
    assert "Your answer contained no code" in _last_human(model, 1)
    # and across iterations the next prompt says the previous answer had none
    assert "No code was submitted" in _last_human(model, 3)


def test_tool_calls_to_kernel_search_reach_the_memory(softmax_reference, softmax_candidate):
    memory = InMemoryKernelMemory()
    other = Problem.from_source(softmax_reference.read_text().replace("batch_size = 129", "batch_size = 77"),
                                name="softmax_77")
    memory.add(record_from_eval(other, softmax_candidate, evaluate(other, softmax_candidate, device="cpu", trials=1)))
    model = ScriptedChatModel(script=[call_tool("kernel_search", query="row-wise softmax", k=1),
                                      submit(softmax_candidate)])
    result = optimize(softmax_reference, model=model, device="cpu", trials=1, memory=memory)
    assert result.ok
    assert "kernel_search" in model.bound_tools[0] and "submit_kernel" in model.bound_tools[0]
    tool_reply = [m for m in model.seen[1] if isinstance(m, ToolMessage)][-1]
    assert "softmax_77" in tool_reply.content and "_softmax_kernel" in tool_reply.content
    assert "Verified kernels for similar problems" in _last_human(model, 0)  # retrieve node
    assert memory.count() == 2  # remember stored the new verified kernel


def test_iteration_limit_stops_the_loop(softmax_reference, wrong_candidate, counting_evaluator):
    model = ScriptedChatModel(script=[submit(wrong_candidate)] * 2)
    graph = compile_kernel_graph(model=model, memory=False, evaluator=counting_evaluator)
    final = graph.invoke({"problem": str(softmax_reference)},
                         context={"device": "cpu", "trials": 1, "iterations": 2})
    assert [a["status"] for a in final["attempts"]] == ["wrong_output", "wrong_output"]
    assert final["attempts"][1]["duplicate_of"] == 1  # an identical candidate is not evaluated twice
    assert len(counting_evaluator.sources) == 1
    assert final["decision"]["action"] == "give_up" and "(2/2)" in final["decision"]["reason"]
    assert "best" not in final or final["best"] is None


def test_no_model_configured_uses_the_builtin_generator_and_says_so(softmax_reference):
    result = optimize(softmax_reference, **RUN)
    assert result.generator == "builtin"
    assert any("no model configured" in n and "built-in generator" in n for n in result.notes)
    assert result.ok, result.attempts[-1].message


def test_llm_without_key_is_a_clear_error_not_a_silent_switch(softmax_reference):
    with pytest.raises(LLMConfigurationError, match="OPENAI_API_KEY"):
        optimize(softmax_reference, generator="llm", **RUN)


def test_start_from_a_users_wrong_kernel(softmax_reference, softmax_candidate, wrong_candidate, tmp_path):
    kernel = tmp_path / "mine.py"
    kernel.write_text(wrong_candidate)
    model = ScriptedChatModel(script=[submit(softmax_candidate)])
    result = optimize(softmax_reference, model=model, start_from=kernel, iterations=1, **RUN)
    assert [(a.iteration, a.generator, a.status) for a in result.attempts] == [
        (0, "user", "wrong_output"), (1, "llm", "correct")]
    prompt = _last_human(model, 0)
    assert "The user's kernel (iteration 0, wrong_output)" in prompt and "first bad index" in prompt


def _timed_correct(problem: Any, candidate: str, **kwargs: Any) -> Any:
    """A GPU verdict without a GPU: correct, timed at 2.0 ms against 3.0 ms eager and 2.5 ms compiled."""
    from tritonsmith.core.results import BenchmarkReport, EvalResult, EvalStatus, Timing

    def timing(ms: float) -> Timing:
        return Timing(median_ms=ms, p20_ms=ms, p80_ms=ms, reps=10, host_median_ms=ms)

    bench = BenchmarkReport(candidate=timing(2.0 + 0.1 * len(candidate) % 3), eager=timing(3.0),
                            compiled=timing(2.5), compile_mode="default")
    return EvalResult(status=EvalStatus.CORRECT, message="correct on 1 trials", problem=problem.name, device="cuda",
                      device_name="Fake GPU", tolerance="kernelbench", benchmark=bench)


def test_the_builtin_fallback_is_announced_once_per_run_not_per_iteration(softmax_reference, monkeypatch,
                                                                           caplog):
    import tritonsmith.graphs.nodes as nodes_module

    monkeypatch.setattr(nodes_module, "resolve_device", lambda device: "cuda")
    monkeypatch.setenv("TRITONSMITH_PROFILE", "0")
    graph = compile_kernel_graph(memory=False, evaluator=_timed_correct)
    with caplog.at_level(logging.WARNING, logger="tritonsmith.graphs.nodes"):
        final = graph.invoke({"problem": str(softmax_reference)}, context={"device": "cuda", "iterations": 3})
    assert [a["generator"] for a in final["attempts"]] == ["builtin"] * 3
    assert sum("no model configured" in n for n in final["notes"]) == 1
    assert sum("no model configured" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("iterations, profile, profiled", [(1, True, 0), (3, True, 2), (3, False, 0)])
def test_only_attempts_that_will_be_refined_are_profiled(softmax_reference, softmax_candidate, monkeypatch,
                                                         iterations, profile, profiled):
    """A profile feeds the next generation; after the last iteration it would only cost GPU time."""
    import tritonsmith.graphs.nodes as nodes_module

    monkeypatch.setattr(nodes_module, "resolve_device", lambda device: "cuda")
    calls: list[str] = []

    def profiler(problem: Any, source: str, *, device: str) -> str:
        calls.append(source)
        return "memory-bound at 40% of the floor"

    variants = [submit(softmax_candidate.replace("BLOCK", f"BLOCK{i}")) for i in range(iterations)]
    graph = compile_kernel_graph(model=ScriptedChatModel(script=variants), memory=False, evaluator=_timed_correct,
                                 profiler=profiler)
    if not profile:
        monkeypatch.setenv("TRITONSMITH_PROFILE", "0")  # the environment layer, as a suite worker inherits it
    final = graph.invoke({"problem": str(softmax_reference)}, context={"device": "cuda", "iterations": iterations})
    assert [a["status"] for a in final["attempts"]] == ["correct"] * iterations
    assert len(calls) == profiled
    assert [bool(a.get("profile")) for a in final["attempts"]] == [True] * profiled + [False] * (iterations - profiled)


def test_the_model_sees_the_loop_and_checks_a_draft_with_evaluate_kernel(softmax_reference, softmax_candidate,
                                                                         wrong_candidate):
    draft = call_tool("evaluate_kernel", candidate_source=wrong_candidate)
    model = ScriptedChatModel(script=[draft, call_tool("evaluate_kernel", candidate_source=wrong_candidate),
                                      call_tool("evaluate_kernel", candidate_source=wrong_candidate),
                                      submit(softmax_candidate)])
    result = optimize(softmax_reference, model=model, iterations=3, **RUN)
    assert [a.status for a in result.attempts] == ["correct"]  # drafts are not attempts
    first = _last_human(model, 0)
    assert "iterations left after this one: 2" in first and "up to 4 round(s) of tool calls" in first
    assert "the Triton CPU interpreter: correctness is checked, speed is not measured" in first
    assert "`evaluate_kernel` checks a draft" in first
    checked = _last_input(model, 1)
    assert "status: wrong_output" in checked and "draft check 1: one trial; 1 draft check(s) left" in checked
    assert "(3 tool round(s) left before you must submit)" in checked
    assert "evaluate_kernel is spent (2 drafts per iteration)" in _last_input(model, 3)


def test_a_conversation_over_the_token_budget_restarts_with_a_fresh_prompt(softmax_reference, softmax_candidate,
                                                                            wrong_candidate):
    model = ScriptedChatModel(script=[submit(wrong_candidate), submit(softmax_candidate)])
    result = optimize(softmax_reference, model=model, llm_context_tokens=1000, **RUN)
    assert [a.status for a in result.attempts] == ["wrong_output", "correct"]
    second = model.seen[1]
    assert len(second) == 2 and "Your previous attempt (iteration 1, wrong_output)" in second[1].content


def test_every_tool_argument_has_a_description(softmax_reference):
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from tritonsmith.agents import default_toolkit
    from tritonsmith.tools import make_kernel_search_tool, submit_kernel
    from tritonsmith.agents.base import GenerationRequest
    from tritonsmith.tools.ports import MemoryStore, default_profiler

    request = GenerationRequest(problem=Problem.from_file(softmax_reference), iteration=1, device="cpu")
    toolkit = default_toolkit(store=MemoryStore(InMemoryKernelMemory()), profiler=default_profiler(),
                              evaluate=evaluate, eval_settings={})
    tools = [*toolkit(request), submit_kernel, make_kernel_search_tool(MemoryStore(InMemoryKernelMemory()))]
    assert {t.name for t in tools} >= {"kernel_search", "profile_kernel", "search_web", "evaluate_kernel",
                                       "submit_kernel"}
    for t in tools:
        fn = convert_to_openai_tool(t)["function"]
        assert fn["description"] and "Args:" not in fn["description"], t.name
        for name, prop in fn["parameters"]["properties"].items():
            assert prop.get("description"), f"{t.name}.{name} has no description"


def test_a_scaled_run_tells_the_model_the_sizes_it_is_evaluated_at(softmax_reference, softmax_candidate):
    model = ScriptedChatModel(script=[submit(softmax_candidate)])
    result = optimize(softmax_reference, model=model, scale=True, **RUN)
    assert result.ok
    assert "evaluated at reduced sizes: shapes scaled down from the original problem" in _last_human(model, 0)


_WIDE_SOFTMAX = '''import torch
import torch.nn as nn

batch_size = 6
dim = 65537


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


def test_a_scaled_run_of_the_builtin_generator_writes_kernels_for_the_scaled_sizes(tmp_path):
    """Regression: with --scale the evaluator runs the scaled problem (here every row is shorter, not only
    the batch); the built-in generator wrote kernels for the original sizes, and their launchers refused."""
    path = tmp_path / "wide_softmax.py"
    path.write_text(_WIDE_SOFTMAX)
    scaled = Problem.from_file(path).scaled()
    assert scaled.scaling and "dim" in scaled.scaling and "batch_size" not in scaled.scaling
    result = optimize(path, generator="builtin", scale=True, iterations=1, **RUN)
    assert result.ok, result.attempts[-1].message
    assert [a.generator for a in result.attempts] == ["builtin"]
