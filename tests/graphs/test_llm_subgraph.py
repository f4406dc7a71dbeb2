"""The LLM generator's tool calls as steps a parent graph sees: checkpointed, streamed, interruptible.

The compiled kernel graph is mounted in a parent graph with a checkpointer; the LLM generator (a scripted
model) is told to stop before its tools run. The parent's stream ends at that point with the tool call
pending, and resuming from the checkpoint runs the tool once, asks the model once more and finishes,
without repeating the model's first answer.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from tritonsmith.tools import make_kernel_search_tool
from tritonsmith.agents.llm import LLMGenerator
from tritonsmith.graphs import compile_kernel_graph
from tritonsmith.graphs.state import AttemptRecord
from tritonsmith.graphs.testing import ScriptedChatModel, call_tool, submit
from tritonsmith.tools.ports import RetrievedKernel

CPU = {"device": "cpu", "trials": 1}


class ParentState(TypedDict, total=False):
    problem: Any
    best: AttemptRecord | None
    attempts: list[AttemptRecord]


class _Store:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def similar(self, problem: Any, *, k: int, device_name: str | None = None) -> list[RetrievedKernel]:
        return []

    def search_text(self, query: str, *, k: int) -> list[RetrievedKernel]:
        self.queries.append(query)
        return [RetrievedKernel(problem_name="softmax_77", source="def _softmax_kernel(): ...", reason="same op")]

    def remember(self, *args: Any, **kwargs: Any) -> None:
        return None


def _parent(kernel_graph: Any) -> Any:
    parent = StateGraph(ParentState)
    parent.add_node("kernel", kernel_graph)
    parent.add_edge(START, "kernel")
    parent.add_edge("kernel", END)
    return parent.compile(checkpointer=InMemorySaver())


def test_a_parent_graph_stops_before_the_llms_tool_call_and_resumes(softmax_reference, softmax_candidate,
                                                                    counting_evaluator):
    store = _Store()
    model = ScriptedChatModel(script=[call_tool("kernel_search", query="row softmax"), submit(softmax_candidate)])
    generator = LLMGenerator(model, tools=[make_kernel_search_tool(store)], interrupt_before=("tools",))
    app = _parent(compile_kernel_graph(generator=generator, memory=False, evaluator=counting_evaluator,
                                       name="kernel"))
    config = {"configurable": {"thread_id": "parent-llm-1"}}

    first = list(app.stream({"problem": str(softmax_reference)}, config=config, context=CPU,
                            stream_mode="updates", subgraphs=True))
    # the model's answer streamed as a step of the LLM subgraph, inside the kernel graph's generate node
    answered = [(ns, u) for ns, u in first if "agent" in u]
    assert len(answered) == 1 and [p.split(":")[0] for p in answered[0][0]] == ["kernel", "generate"]
    call = answered[0][1]["agent"]["messages"][-1]
    assert isinstance(call, AIMessage) and call.tool_calls[0]["name"] == "kernel_search"
    assert not any("tools" in u for _, u in first)  # stopped before the tool ran
    assert store.queries == [] and model.remaining == 1 and counting_evaluator.sources == []

    snapshot = app.get_state(config, subgraphs=True)
    assert snapshot.next == ("kernel",) and snapshot.tasks[0].state.next == ("generate",)
    # the conversation's own checkpoint, under the generate task's namespace: the tool call is pending
    saved = app.checkpointer.get_tuple({"configurable": {"thread_id": "parent-llm-1",
                                                         "checkpoint_ns": "|".join(answered[0][0])}})
    pending = saved.checkpoint["channel_values"]["messages"]
    assert pending[-1].tool_calls[0]["args"] == {"query": "row softmax"}
    assert not any(isinstance(m, ToolMessage) for m in pending)

    rest = list(app.stream(None, config=config, context=CPU, stream_mode="updates", subgraphs=True))
    ran = [u["tools"]["messages"] for _, u in rest if "tools" in u]
    assert len(ran) == 1 and isinstance(ran[0][0], ToolMessage) and "softmax_77" in ran[0][0].content
    assert store.queries == ["row softmax"] and model.remaining == 0  # the first answer was not asked again
    assert len(model.seen) == 2 and isinstance(model.seen[1][-1], ToolMessage)
    final = app.get_state(config).values
    assert [a["status"] for a in final["attempts"]] == ["correct"]
    assert counting_evaluator.sources == [softmax_candidate] and final["best"]["iteration"] == 1


def test_without_an_interrupt_the_tool_steps_still_stream_from_a_parent(softmax_reference, softmax_candidate,
                                                                         counting_evaluator):
    store = _Store()
    model = ScriptedChatModel(script=[call_tool("kernel_search", query="softmax"), submit(softmax_candidate)])
    generator = LLMGenerator(model, tools=[make_kernel_search_tool(store)])
    app = _parent(compile_kernel_graph(generator=generator, memory=False, evaluator=counting_evaluator,
                                       name="kernel"))
    steps = [next(iter(u)) for ns, u in app.stream({"problem": str(softmax_reference)},
                                                   config={"configurable": {"thread_id": "parent-llm-2"}},
                                                   context=CPU, stream_mode="updates", subgraphs=True)
             if len(ns) == 2]
    assert steps == ["agent", "tools", "tally", "agent"]


def test_interrupt_before_names_a_node_of_the_conversation():
    with pytest.raises(ValueError, match="no node named 'tool'.*agent, tools"):
        LLMGenerator(ScriptedChatModel(script=[]), interrupt_before=("tool",))
