"""Extend the graph with a node of your own: a gate that sends each verified kernel for human review.

    python examples/add_node.py

``build_kernel_graph`` returns the uncompiled StateGraph: add nodes and edges, then compile. Here a
"review" node runs after "remember" (the finish path) and writes a checklist into the state.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END

from tritonsmith.examples import example_path
from tritonsmith.graphs import build_kernel_graph
from tritonsmith.graphs.testing import scripted_generator, submit


def review(state: dict[str, Any]) -> dict[str, Any]:
    """Your logic: here, list what a human should check before the kernel ships."""
    best = state["best"]
    checks = [f"verified at iteration {best['iteration']} by the {best['generator']} generator"]
    if best["reward_basis"] == "unmeasured":
        checks.append("speed not measured: benchmark it on the target GPU (tritonsmith eval --device cuda)")
    return {"notes": [f"review: {c}" for c in checks]}


def main() -> None:
    generator = scripted_generator([submit(example_path("softmax_triton.py").read_text())])  # offline
    graph = build_kernel_graph(generator=generator, memory=False)
    print("nodes to hook onto:", ", ".join(n for n in graph.nodes))  # analyze, retrieve, generate, ...
    graph.add_node("review", review)
    graph.add_edge("remember", "review")
    graph.add_edge("review", END)
    final = graph.compile().invoke({"problem": str(example_path("softmax_reference.py"))},
                                   context={"device": "cpu", "trials": 1})
    for note in final["notes"]:
        print(note)


if __name__ == "__main__":
    main()
