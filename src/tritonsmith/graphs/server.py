"""The entry point of ``langgraph.json`` (``langgraph dev`` / LangGraph Studio / LangGraph Server).

``make_graph`` builds and compiles the graph; importing this module imports langgraph only: no GPU, no
model client, no memory and no kernel compilation happen until a run needs them. The server supplies
the checkpointer and store. Settings come from the run context (``KernelContext`` fields, e.g.
``{"iterations": 5, "device": "cpu"}``) and from the environment (``.env``: ``OPENAI_API_KEY``,
``TRITONSMITH_*``).
"""

from __future__ import annotations

from typing import Any

from langgraph.graph.state import CompiledStateGraph

from tritonsmith.graphs.builder import DEFAULT_NAME, build_kernel_graph

__all__ = ["make_graph"]


def make_graph(config: Any = None) -> CompiledStateGraph:
    """The kernel graph, compiled without a checkpointer (the server provides persistence)."""
    return build_kernel_graph().compile(name=DEFAULT_NAME)
