"""Build the refinement loop as a LangGraph ``StateGraph``.

    START -> analyze -> retrieve -> generate -> evaluate -> profile -> decide
    decide -> generate (refine) | remember -> END (finish) | END (give up)

``build_kernel_graph`` returns the *uncompiled* graph so users can add their own nodes and edges;
``compile_kernel_graph`` compiles it with a checkpointer / store / name, ready to run on its own or to
mount as a subgraph. Building never touches a GPU, a model or the memory: those are resolved at run time.

A node of your own goes into the loop by registration, without editing this package:
``build_kernel_graph(extra_nodes=[ExtraNode(name="review", fn=review, after="generate")])`` runs
``review`` on every pass between ``generate`` and ``evaluate``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langgraph.graph import END, START, StateGraph

from tritonsmith.core.settings import KernelContext
from tritonsmith.graphs._resolve import GraphDeps
from tritonsmith.graphs.nodes import NODE_NAMES, KernelNodes
from tritonsmith.graphs.routing import route_after_decide
from tritonsmith.graphs.state import KernelInput, KernelState

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.store.base import BaseStore
    from langgraph.types import Checkpointer

    from tritonsmith.agents.base import Generator
    from tritonsmith.tools.ports import Evaluator, KernelProfiler

__all__ = ["DEFAULT_NAME", "ExtraNode", "INSERTABLE_AFTER", "build_kernel_graph", "compile_kernel_graph"]

DEFAULT_NAME = "tritonsmith"

# The loop's fixed edges, in order; ``decide`` routes conditionally (see ``routing``) and is not listed.
_CHAIN: tuple[tuple[str, str], ...] = (
    (START, "analyze"), ("analyze", "retrieve"), ("retrieve", "generate"), ("generate", "evaluate"),
    ("evaluate", "profile"), ("profile", "decide"), ("remember", END),
)
INSERTABLE_AFTER: tuple[str, ...] = tuple(a for a, _ in _CHAIN if a != START)


@dataclass(frozen=True, kw_only=True)
class ExtraNode:
    """A node of your own, inserted on the loop's edge that leaves ``after``.

    ``fn`` is a LangGraph node: ``fn(state)`` or ``fn(state, runtime)`` returning a partial state update
    (e.g. ``{"notes": [...]}``). ``after`` is one of :data:`INSERTABLE_AFTER`: ``"generate"`` puts the node
    between ``generate`` and ``evaluate`` (it sees ``state["pending"]`` on every pass), ``"remember"``
    after the finish. Several nodes after the same one run in the order given.
    """

    name: str
    fn: Callable[..., Any]
    after: str


def build_kernel_graph(
    *,
    generator: Generator | None = None,
    model: BaseChatModel | str | None = None,
    memory: Any = None,
    tools: Sequence[BaseTool] | Literal["default"] = "default",
    context: KernelContext | None = None,
    profiler: KernelProfiler | None | Literal["default"] = "default",
    evaluator: Evaluator | None = None,
    extra_nodes: Sequence[ExtraNode] = (),
) -> StateGraph:
    """The uncompiled kernel-optimisation graph.

    Args:
        generator: any :class:`~tritonsmith.agents.base.Generator`; overrides ``model``.
        model: a LangChain chat model (used through :class:`~tritonsmith.agents.llm.LLMGenerator`) or a
            model name; None = from the settings (an LLM when a key/base URL is configured, else the
            built-in generator).
        memory: a ``KernelMemory`` or :class:`~tritonsmith.tools.ports.KernelStore`; None opens the
            on-disk memory at run time (per the ``use_memory``/``memory_dir`` settings); False = no memory.
        tools: tools offered to the LLM; ``"default"`` = kernel search, profiler and web search.
        context: settings given as arguments; they win over the run context and the environment.
        profiler: profiles correct kernels on a GPU; ``"default"`` = ``tritonsmith.profiler.profile``.
        evaluator: replaces ``tritonsmith.evaluator.evaluate`` (tests, remote evaluation).
        extra_nodes: nodes of your own, each inserted after an existing node (see :class:`ExtraNode`).
    """
    arguments = context
    if isinstance(model, str):
        arguments = KernelContext(**{**(_as_dict(context)), "model": model})
    deps = GraphDeps(generator=generator, model=model, memory=memory, tools=tools, profiler=profiler,
                     evaluator=evaluator, arguments=arguments)
    nodes = KernelNodes(deps)
    graph = StateGraph(KernelState, context_schema=KernelContext, input_schema=KernelInput)
    for name in NODE_NAMES:
        graph.add_node(name, getattr(nodes, name))
    for extra in _checked(extra_nodes):
        graph.add_node(extra.name, extra.fn)
    for a, b in _chain_with(extra_nodes):
        graph.add_edge(a, b)
    graph.add_conditional_edges("decide", route_after_decide, {"generate": "generate", "remember": "remember",
                                                               END: END})
    return graph


def compile_kernel_graph(
    graph: StateGraph | None = None,
    *,
    checkpointer: Checkpointer = None,
    store: BaseStore | None = None,
    name: str = DEFAULT_NAME,
    **build_kwargs: Any,
) -> CompiledStateGraph:
    """Compile ``graph`` (default: ``build_kernel_graph(**build_kwargs)``).

    With a ``checkpointer`` a run resumes after a crash: invoke again with ``None`` as input and the
    same ``thread_id``. Mounted as a node of a parent graph, it inherits the parent's checkpointer.
    """
    if graph is not None and build_kwargs:
        raise TypeError("pass either a built graph or build_kernel_graph arguments, not both")
    graph = graph if graph is not None else build_kernel_graph(**build_kwargs)
    return graph.compile(checkpointer=checkpointer, store=store, name=name)


def _checked(extra_nodes: Sequence[ExtraNode]) -> Sequence[ExtraNode]:
    taken = set(NODE_NAMES)
    for extra in extra_nodes:
        if extra.after not in INSERTABLE_AFTER:
            raise ValueError(f"extra node {extra.name!r}: after={extra.after!r} is not a node with a fixed next "
                             f"step; use one of {', '.join(INSERTABLE_AFTER)} ('decide' routes conditionally)")
        if extra.name in taken or extra.name in (START, END):
            raise ValueError(f"extra node name {extra.name!r} is taken; the graph's nodes are "
                             f"{', '.join(sorted(taken))}")
        if not callable(extra.fn):
            raise TypeError(f"extra node {extra.name!r}: fn must be callable, not {type(extra.fn).__name__}")
        taken.add(extra.name)
    return extra_nodes


def _chain_with(extra_nodes: Sequence[ExtraNode]) -> list[tuple[str, str]]:
    """The fixed edges with each extra node spliced in after its ``after`` node, in the order given."""
    edges: list[tuple[str, str]] = []
    for a, b in _CHAIN:
        tail = a
        for extra in [e for e in extra_nodes if e.after == a]:
            edges.append((tail, extra.name))
            tail = extra.name
        edges.append((tail, b))
    return edges


def _as_dict(context: KernelContext | None) -> dict[str, Any]:
    if context is None:
        return {}
    import dataclasses

    return {f.name: getattr(context, f.name) for f in dataclasses.fields(context)}
