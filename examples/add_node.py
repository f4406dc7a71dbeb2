"""Extend the loop with a node of your own: a reviewer between "generate" and "evaluate".

    python examples/add_node.py

``build_kernel_graph(extra_nodes=[ExtraNode(name=..., fn=..., after=...)])`` splices a node into the loop
without editing tritonsmith: here "review" runs on every pass, after the generator wrote a candidate and
before the evaluator judges it, and leaves a note in the state. The graph comes back uncompiled, so its
node names can be listed (and more nodes and edges added) before compiling.
"""

from __future__ import annotations

import re
from typing import Any

from tritonsmith.examples import example_path
from tritonsmith.graphs import ExtraNode, build_kernel_graph
from tritonsmith.graphs.testing import ScriptedChatModel, submit


def review(state: dict[str, Any]) -> dict[str, Any]:
    """Your logic: here, what a human reviewer would note about the candidate before it is evaluated."""
    pending = state["pending"]
    source = pending["source"] or ""
    kernels = re.findall(r"@triton\.jit\s+def (\w+)", source)
    note = (f"review: iteration {pending['iteration']} ({pending['generator']}): "
            f"{len(kernels)} Triton kernel(s) {', '.join(kernels) or '-'}, {len(source.splitlines())} lines")
    return {"notes": [note]}


def main() -> None:
    model = ScriptedChatModel(script=[submit(example_path("softmax_triton.py").read_text())])
    graph = build_kernel_graph(model=model, memory=False,
                               extra_nodes=[ExtraNode(name="review", fn=review, after="generate")])
    print("nodes:", ", ".join(graph.nodes))
    print("review's edges:", ", ".join(f"{a} -> {b}" for a, b in sorted(graph.edges) if "review" in (a, b)))
    final = graph.compile().invoke({"problem": str(example_path("softmax_reference.py"))},
                                   context={"device": "cpu", "trials": 1})
    for note in final["notes"]:
        if note.startswith("review:"):
            print(note)
    best = final["best"]
    print(f"best: iteration {best['iteration']} ({best['status']}, reward {best['reward']:.2f})")


if __name__ == "__main__":
    main()
