"""Mount the tritonsmith graph as a subgraph of your own LangGraph app, with a checkpointer and live events.

    python examples/embed_graph.py            # offline: a scripted model replays a bundled kernel
    OPENAI_API_KEY=... python examples/embed_graph.py --llm    # a real model (or OPENAI_BASE_URL for vLLM/Ollama)

The parent app has its own state and a node of its own ("publish") after the kernel graph. Progress
events from inside the subgraph arrive on the "custom" stream; the parent's checkpointer persists
both graphs, so an interrupted run resumes with ``app.invoke(None, config)``.
"""

from __future__ import annotations

import sys
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from tritonsmith.examples import example_path
from tritonsmith.graphs import compile_kernel_graph
from tritonsmith.graphs.testing import scripted_generator, submit


class AppState(TypedDict, total=False):
    problem: str  # the kernel graph reads this key ...
    best: dict[str, Any] | None  # ... and writes these back
    decision: dict[str, str]
    published: str


def publish(state: AppState) -> dict[str, str]:
    best = state.get("best")
    if not best:
        return {"published": f"nothing to publish: {state['decision']['reason']}"}
    return {"published": f"kernel from iteration {best['iteration']} ({best['status']}, reward {best['reward']:.2f})"}


def main() -> None:
    if "--llm" in sys.argv:
        generator = None  # an LLM from the environment: OPENAI_API_KEY / OPENAI_BASE_URL / TRITONSMITH_MODEL
    else:  # offline: its events say generator "scripted", not "llm"
        generator = scripted_generator([submit(example_path("softmax_triton.py").read_text())])
    kernel_graph = compile_kernel_graph(generator=generator, memory=False, name="kernel")

    app = StateGraph(AppState)
    app.add_node("kernel", kernel_graph)
    app.add_node("publish", publish)
    app.add_edge(START, "kernel")
    app.add_edge("kernel", "publish")
    app.add_edge("publish", END)
    compiled = app.compile(checkpointer=InMemorySaver())

    config = {"configurable": {"thread_id": "example-1"}}
    state = {"problem": str(example_path("softmax_reference.py"))}
    for namespace, mode, payload in compiled.stream(state, config=config, context={"device": "cpu", "trials": 1},
                                                    stream_mode=["custom", "updates"], subgraphs=True):
        if mode == "custom":
            print(f"{'/'.join(namespace) or 'app'}: {payload}")
    print(compiled.get_state(config).values["published"])


if __name__ == "__main__":
    main()
