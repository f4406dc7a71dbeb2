"""The LLM generator's conversation subgraph: an agent node and a ToolNode, mounted and interrupted directly."""

from __future__ import annotations

import threading
import time
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.llm import LLMGenerator
from tritonsmith.core.problem import Problem
from tritonsmith.graphs.testing import ScriptedChatModel, call_tool, submit

CODE = ("import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")


@pytest.fixture
def request_(softmax_reference) -> GenerationRequest:
    return GenerationRequest(problem=Problem.from_file(softmax_reference), iteration=1, device="cpu")


class _Clock:
    """Two tools that note when they run: a slow one and a fast one."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def tool(self, name: str, seconds: float) -> StructuredTool:
        def run(query: str) -> str:
            start = time.monotonic()
            time.sleep(seconds)
            with self.lock:
                self.spans[name] = (start, time.monotonic())
            return f"{name}: {query}"

        return StructuredTool.from_function(run, name=name, description=f"{name} a query")


def test_several_tool_calls_in_one_reply_run_one_at_a_time_in_order(request_):
    clock = _Clock()
    both = AIMessage(content="", tool_calls=[
        {"name": "slow", "args": {"query": "a"}, "id": "c1", "type": "tool_call"},
        {"name": "fast", "args": {"query": "b"}, "id": "c2", "type": "tool_call"}])
    model = ScriptedChatModel(script=[both, submit(CODE)])
    cand = LLMGenerator(model, tools=[clock.tool("slow", 0.3), clock.tool("fast", 0.0)]).generate(request_)
    assert cand.source == CODE and cand.note.startswith("submitted after 1 tool round(s)")
    assert clock.spans["fast"][0] >= clock.spans["slow"][1]  # not concurrently: two timed tools share one GPU
    results = [m for m in model.seen[1] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content.split("\n")[0]) for m in results] == [("c1", "slow: a"), ("c2", "fast: b")]
    assert "tool round(s) left" in results[-1].content and "left" not in results[0].content


class _Parent(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    source: str | None


def test_the_conversation_mounts_as_a_node_stops_before_its_tools_and_resumes(request_):
    clock = _Clock()
    model = ScriptedChatModel(script=[call_tool("fast", query="softmax"), submit(CODE)])
    gen = LLMGenerator(model, tools=[clock.tool("fast", 0.0)])
    conversation = gen.conversation_graph(request_).compile(interrupt_before=["tools"], name="llm")
    parent = StateGraph(_Parent)
    parent.add_node("llm", conversation)
    parent.add_edge(START, "llm")
    parent.add_edge("llm", END)
    app = parent.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "llm-1"}}
    opening = gen._opening(request_, compact=False, evaluate_tool=False)

    first = list(app.stream({"messages": opening}, config=config, stream_mode="updates", subgraphs=True))
    assert [next(iter(u)) for ns, u in first if ns] == ["agent"] and clock.spans == {}
    inner = app.get_state(config, subgraphs=True).tasks[0].state
    assert inner.next == ("tools",) and inner.values["messages"][-1].tool_calls[0]["args"] == {"query": "softmax"}

    rest = list(app.stream(None, config=config, stream_mode="updates", subgraphs=True))
    assert [next(iter(u)) for ns, u in rest if ns] == ["tools", "tally", "agent"]
    assert set(clock.spans) == {"fast"} and model.remaining == 0 and len(model.seen) == 2
    assert app.get_state(config).values["source"] == CODE


def test_an_interrupt_without_a_parent_is_a_clear_error(request_):
    clock = _Clock()
    model = ScriptedChatModel(script=[call_tool("fast", query="softmax"), submit(CODE)])
    gen = LLMGenerator(model, tools=[clock.tool("fast", 0.0)], interrupt_before=("tools",))
    with pytest.raises(RuntimeError, match="interrupt_before needs a parent graph"):
        gen.generate(request_)
    assert clock.spans == {}
