"""Build the refinement loop as a LangGraph ``StateGraph``.

    START -> analyze -> retrieve -> generate -> evaluate -> profile -> decide
    decide -> generate (refine) | remember -> END (finish) | END (give up)

``build_kernel_graph`` returns the *uncompiled* graph so users can add their own nodes and edges;
``compile_kernel_graph`` compiles it with a checkpointer / store / name, ready to run on its own or to
mount as a subgraph. Building never touches a GPU, a model or the memory: those are resolved at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from langgraph.graph import END, START, StateGraph

from tritonsmith.core.settings import KernelContext
from tritonsmith.graphs._resolve import GraphDeps
from tritonsmith.graphs.nodes import KernelNodes
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

__all__ = ["DEFAULT_NAME", "build_kernel_graph", "compile_kernel_graph"]

DEFAULT_NAME = "tritonsmith"


def build_kernel_graph(
    *,
    generator: Generator | None = None,
    model: BaseChatModel | str | None = None,
    memory: Any = None,
    tools: Sequence[BaseTool] | Literal["default"] = "default",
    context: KernelContext | None = None,
    profiler: KernelProfiler | None | Literal["default"] = "default",
    evaluator: Evaluator | None = None,
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
    """
    arguments = context
    if isinstance(model, str):
        arguments = KernelContext(**{**(_as_dict(context)), "model": model})
    deps = GraphDeps(generator=generator, model=model, memory=memory, tools=tools, profiler=profiler,
                     evaluator=evaluator, arguments=arguments)
    nodes = KernelNodes(deps)
    graph = StateGraph(KernelState, context_schema=KernelContext, input_schema=KernelInput)
    graph.add_node("analyze", nodes.analyze)
    graph.add_node("retrieve", nodes.retrieve)
    graph.add_node("generate", nodes.generate)
    graph.add_node("evaluate", nodes.evaluate)
    graph.add_node("profile", nodes.profile)
    graph.add_node("decide", nodes.decide)
    graph.add_node("remember", nodes.remember)
    graph.add_edge(START, "analyze")
    graph.add_edge("analyze", "retrieve")
    graph.add_edge("retrieve", "generate")
    graph.add_edge("generate", "evaluate")
    graph.add_edge("evaluate", "profile")
    graph.add_edge("profile", "decide")
    graph.add_conditional_edges("decide", route_after_decide, {"generate": "generate", "remember": "remember",
                                                               END: END})
    graph.add_edge("remember", END)
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


def _as_dict(context: KernelContext | None) -> dict[str, Any]:
    if context is None:
        return {}
    import dataclasses

    return {f.name: getattr(context, f.name) for f in dataclasses.fields(context)}
