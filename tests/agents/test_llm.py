"""The LLM generator with a scripted tool-calling model (no evaluation here: see tests/graphs)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.llm import (
    LLMConfigurationError,
    LLMGenerator,
    Pricing,
    chat_model_from_settings,
)
from tritonsmith.agents.prompts import NO_CODE_FEEDBACK, TOOL_BUDGET_SPENT
from tritonsmith.core.problem import Problem
from tritonsmith.core.settings import Settings
from tritonsmith.graphs.testing import ScriptedChatModel, call_tool, reply, submit
from tritonsmith.tools.ports import RetrievedKernel

CODE = ("import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")


@pytest.fixture
def request_(softmax_reference) -> GenerationRequest:
    return GenerationRequest(problem=Problem.from_file(softmax_reference), iteration=1, device="cpu",
                             analysis="memory-bound")


class _Store:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def similar(self, problem, *, k, device_name=None):
        return []

    def search_text(self, query, *, k):
        self.queries.append(query)
        return [RetrievedKernel(problem_name="softmax_77", source="def _softmax_kernel(): ...", reason="similar")]

    def remember(self, *args, **kwargs):
        return None


def test_submission_through_the_tool(request_):
    model = ScriptedChatModel(script=[submit(CODE, notes="identity")])
    cand = LLMGenerator(model).generate(request_)
    assert cand.source == CODE and "identity" in cand.note
    assert cand.usage.input_tokens == 100 and cand.usage.output_tokens > 0 and cand.usage.cost_usd is None
    assert model.bound_tools[0] == ["submit_kernel"]


def test_submission_through_a_fenced_block_with_prose_around_it(request_):
    text = f"Here is my kernel.\n\n```python\n{CODE}```\n\nIt reads each row once."
    cand = LLMGenerator(ScriptedChatModel(script=[reply(text)])).generate(request_)
    assert cand.source == CODE


def test_an_answer_without_code_is_fed_back_then_given_up(request_):
    model = ScriptedChatModel(script=[reply("I would tile it."), reply("Still thinking."), reply("Tiles!")])
    cand = LLMGenerator(model, max_no_code_replies=2).generate(request_)
    assert cand.source is None and "no code in 3 answers" in cand.note and "Tiles!" in cand.note
    assert model.seen[1][-1].content == NO_CODE_FEEDBACK and model.remaining == 0


def test_tool_rounds_are_bounded_then_only_submit_is_offered(request_):
    store = _Store()
    from tritonsmith.tools import make_kernel_search_tool

    model = ScriptedChatModel(script=[call_tool("kernel_search", query="softmax"),
                                      call_tool("kernel_search", query="row max"), submit(CODE)])
    gen = LLMGenerator(model, tools=[make_kernel_search_tool(store)], max_tool_rounds=2,
                       pricing=Pricing(input_per_mtok=1.0, output_per_mtok=4.0))
    cand = gen.generate(request_)
    assert cand.source == CODE and store.queries == ["softmax", "row max"]
    assert model.bound_tools[0] == ["kernel_search", "submit_kernel"] and model.bound_tools[1] == ["submit_kernel"]
    last_call = model.seen[2]
    tool_msgs = [m for m in last_call if isinstance(m, ToolMessage)]
    assert len(tool_msgs) == 2 and "softmax_77" in tool_msgs[0].content
    assert last_call[-1].content == TOOL_BUDGET_SPENT
    u = cand.usage
    assert u.cost_usd == pytest.approx((u.input_tokens * 1.0 + u.output_tokens * 4.0) / 1e6)


def test_unknown_tools_and_bad_arguments_are_reported_to_the_model(request_):
    from tritonsmith.tools import make_kernel_search_tool

    model = ScriptedChatModel(script=[call_tool("run_shell", cmd="ls"), call_tool("kernel_search", k=2),
                                      submit(CODE)])
    LLMGenerator(model, tools=[make_kernel_search_tool(_Store())]).generate(request_)
    first, second = (next(m for m in reversed(model.seen[i]) if isinstance(m, ToolMessage)) for i in (1, 2))
    assert first.status == "error" and "unknown tool 'run_shell'" in first.content and "kernel_search" in first.content
    assert second.status == "error" and "query" in second.content


def test_malformed_submit_arguments_are_recovered(request_):
    raw = '{"source": "' + CODE.replace("\n", "\\n") + '", "notes": "x'  # truncated JSON
    bad = AIMessage(content="", invalid_tool_calls=[{"name": "submit_kernel", "args": raw, "id": "c1",
                                                      "error": "bad json", "type": "invalid_tool_call"}])
    cand = LLMGenerator(ScriptedChatModel(script=[bad])).generate(request_)
    assert cand.source == CODE and "recovered" in cand.note


def test_submit_without_source_is_fed_back(request_):
    empty = AIMessage(content="", tool_calls=[{"name": "submit_kernel", "args": {"notes": "oops"}, "id": "c9",
                                               "type": "tool_call"}])
    model = ScriptedChatModel(script=[empty, submit(CODE)])
    cand = LLMGenerator(model).generate(request_)
    assert cand.source == CODE
    retry = model.seen[1]
    assert isinstance(retry[-2], ToolMessage) and retry[-2].tool_call_id == "c9"  # every call answered
    assert isinstance(retry[-1], HumanMessage) and "no `source` argument" in retry[-1].content


def test_chat_model_from_settings_always_sets_timeout_and_retries():
    model = chat_model_from_settings(Settings(api_key="sk-test", model="m1", llm_timeout_s=7.0, max_retries=1))
    assert model.request_timeout == 7.0 and model.max_retries == 1 and model.model_name == "m1"
    local = chat_model_from_settings(Settings(base_url="http://127.0.0.1:9/v1"))
    assert local.openai_api_base == "http://127.0.0.1:9/v1" and local.max_retries == 2
    with pytest.raises(LLMConfigurationError, match="OPENAI_API_KEY.*base URL"):
        chat_model_from_settings(Settings())


def test_unreachable_server_is_a_clear_fatal_model_error(request_):
    gen = LLMGenerator.from_settings(Settings(base_url="http://127.0.0.1:9/v1", llm_timeout_s=3.0, max_retries=0))
    cand = gen.generate(request_)
    assert cand.source is None and cand.model_error_fatal
    assert "127.0.0.1:9/v1 could not be reached" in (cand.model_error or "")


def test_an_exception_from_the_model_becomes_a_model_error_candidate(request_):
    import httpx
    import openai

    req = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    err = openai.InternalServerError("boom", response=httpx.Response(503, request=req), body=None)
    cand = LLMGenerator(ScriptedChatModel(script=[err])).generate(request_)
    assert cand.source is None and not cand.model_error_fatal and "HTTP 503" in (cand.model_error or "")
    with pytest.raises(ZeroDivisionError):  # our own bugs still raise
        LLMGenerator(ScriptedChatModel(script=[ZeroDivisionError("bug")])).generate(request_)


def test_refinement_continues_the_conversation_without_resending_examples(request_):
    from dataclasses import replace

    from tritonsmith.agents.base import Attempt
    from tritonsmith.agents.prompts import EXAMPLES_DROPPED

    from langchain_core.tools import StructuredTool

    def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: what to look up.
        """
        return "HEAD\n" + "long line of documentation\n" * 400

    first_req = replace(request_, examples=("# EXAMPLE_KERNEL\n" + "y = 2\n" * 300,), iterations_left=2)
    model = ScriptedChatModel(script=[call_tool("lookup", query="softmax"), submit(CODE),
                                      submit(CODE.replace("return x", "return x * 1"))])
    gen = LLMGenerator(model, tools=[StructuredTool.from_function(lookup, parse_docstring=True)])
    first = gen.generate(first_req)
    assert "EXAMPLE_KERNEL" in model.seen[0][1].content
    attempt = Attempt(iteration=1, source=first.source, result=None, feedback="status: wrong_output — off by one",
                      reward=0.0, generator="llm")
    gen.generate(replace(first_req, iteration=2, history=(attempt,), iterations_left=1))
    convo = model.seen[2]
    assert "EXAMPLE_KERNEL" not in str([m.content for m in convo]) and EXAMPLES_DROPPED in convo[1].content
    looked_up = next(m for m in convo if isinstance(m, ToolMessage) and "HEAD" in m.content)
    assert len(looked_up.content) < 1200 and "call the tool again" in looked_up.content  # kept, shrunk
    assert isinstance(convo[-1], ToolMessage) and "verdict on your iteration 1" in convo[-1].content
    assert "off by one" in convo[-1].content and "iterations left after this one: 1" in convo[-1].content
