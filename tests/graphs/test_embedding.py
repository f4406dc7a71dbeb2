"""Checkpoints, subgraphs and user extensions; the graph's pinned shape."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from tritonsmith.graphs import build_kernel_graph, compile_kernel_graph
from tritonsmith.graphs.state import AttemptRecord
from tritonsmith.graphs.testing import ScriptedChatModel, submit

CPU = {"device": "cpu", "trials": 1}

MERMAID = """\
graph TD;
	__start__([<p>__start__</p>]):::first
	analyze(analyze)
	retrieve(retrieve)
	generate(generate)
	evaluate(evaluate)
	profile(profile)
	decide(decide)
	remember(remember)
	__end__([<p>__end__</p>]):::last
	__start__ --> analyze;
	analyze --> retrieve;
	decide -.-> __end__;
	decide -.-> generate;
	decide -.-> remember;
	evaluate --> profile;
	generate --> evaluate;
	profile --> decide;
	retrieve --> generate;
	remember --> __end__;
"""


def test_graph_shape_is_pinned():
    """A snapshot of the graph's nodes and edges (dotted = the routes decide can take)."""
    mermaid = build_kernel_graph(memory=False).compile().get_graph().draw_mermaid()
    body = "\n".join(line for line in mermaid.splitlines() if not line.startswith(("---", "config", "  ", "\tclassDef")))
    assert body.strip() == MERMAID.strip()


def test_resume_from_a_checkpoint_after_an_interruption(softmax_reference, softmax_candidate, wrong_candidate,
                                                        counting_evaluator):
    outage = ConnectionError("the model server went away")
    model = ScriptedChatModel(script=[submit(wrong_candidate), outage, submit(softmax_candidate)])
    saver = InMemorySaver()
    graph = compile_kernel_graph(model=model, memory=False, evaluator=counting_evaluator, checkpointer=saver)
    config = {"configurable": {"thread_id": "run-1"}}
    with pytest.raises(ConnectionError, match="went away"):
        graph.invoke({"problem": str(softmax_reference)}, config=config, context=CPU)
    saved = graph.get_state(config)
    assert saved.next == ("generate",)  # it stopped while writing iteration 2
    assert [a["status"] for a in saved.values["attempts"]] == ["wrong_output"]
    final = graph.invoke(None, config=config, context=CPU)  # resume: same thread, no new input
    assert [a["status"] for a in final["attempts"]] == ["wrong_output", "correct"]
    assert counting_evaluator.sources == [wrong_candidate, softmax_candidate]  # iteration 1 was not redone
    assert final["best"]["iteration"] == 2 and final["decision"]["action"] == "finish"


class ParentState(TypedDict, total=False):
    problem: Any
    best: AttemptRecord | None
    attempts: list[AttemptRecord]
    report: str


def test_mounted_as_a_subgraph_with_a_users_node(softmax_reference, softmax_candidate):
    model = ScriptedChatModel(script=[submit(softmax_candidate)])
    kernel_graph = compile_kernel_graph(model=model, memory=False, name="kernel")

    def report(state: ParentState) -> dict[str, str]:
        best = state["best"]
        return {"report": f"{best['status']} at iteration {best['iteration']} after {len(state['attempts'])} attempt(s)"}

    parent = StateGraph(ParentState)
    parent.add_node("kernel", kernel_graph)
    parent.add_node("report", report)
    parent.add_edge(START, "kernel")
    parent.add_edge("kernel", "report")
    parent.add_edge("report", END)
    app = parent.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "parent-1"}}
    custom: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    for ns, mode, payload in app.stream({"problem": str(softmax_reference)}, config=config, context=CPU,
                                        stream_mode=["custom", "updates"], subgraphs=True):
        if mode == "custom":
            custom.append((ns, payload))
    assert app.get_state(config).values["report"] == "correct at iteration 1 after 1 attempt(s)"
    assert any(ns and ns[0].startswith("kernel") and e["event"] == "evaluated" for ns, e in custom)


def test_users_extend_the_uncompiled_graph_with_a_node(softmax_reference, softmax_candidate):
    class Flag:
        seen: list[str] = []

    graph = build_kernel_graph(model=ScriptedChatModel(script=[submit(softmax_candidate)]), memory=False)

    def audit(state: dict[str, Any]) -> dict[str, Any]:
        Flag.seen.append(state["decision"]["action"])
        return {}

    graph.add_node("audit", audit)
    graph.add_edge("remember", "audit")
    graph.add_edge("audit", END)
    final = graph.compile().invoke({"problem": str(softmax_reference)}, context=CPU)
    assert Flag.seen == ["finish"] and final["best"]["status"] == "correct"


def test_langgraph_json_factory_loads_without_torch_triton_or_a_model():
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = json.loads((root / "langgraph.json").read_text())
    path, _, attr = spec["graphs"]["tritonsmith"].partition(":")
    code = ("import importlib.util, sys\n"
            f"s = importlib.util.spec_from_file_location('lg_entry', {str(root / path)!r})\n"
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m)\n"
            f"g = m.{attr}({{}})\n"
            "heavy = [n for n in ('torch', 'triton', 'chromadb', 'openai') if n in sys.modules]\n"
            "print(type(g).__name__, heavy)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "CompiledStateGraph []"


def test_add_node_example_runs():
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "add_node.py"
    run = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "review's edges: generate -> review, review -> evaluate\n" in run.stdout  # spliced in mid-loop
    assert "review: iteration 1 (llm): 1 Triton kernel(s) _softmax_kernel" in run.stdout  # and it ran there
