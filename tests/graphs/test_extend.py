"""Extension by registration: a node of one's own spliced into the loop, and ``optimize`` forwarding every
dependency the builder takes."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tritonsmith.core.results import EvalResult, EvalStatus
from tritonsmith.graphs import NODE_NAMES, ExtraNode, build_kernel_graph, optimize
from tritonsmith.graphs.testing import ScriptedChatModel, submit


def _wrong(problem: Any, candidate: str, **kwargs: Any) -> EvalResult:
    return EvalResult(status=EvalStatus.WRONG_OUTPUT, message="wrong on trial 0", problem=problem.name,
                      device=kwargs["device"], device_name="cpu", tolerance="kernelbench")


def test_an_extra_node_runs_between_generate_and_evaluate_on_every_pass(softmax_reference, softmax_candidate):
    evaluated: list[str] = []
    reviewed: list[tuple[int, int]] = []

    def evaluator(problem: Any, candidate: str, **kwargs: Any) -> EvalResult:
        evaluated.append(candidate)
        return _wrong(problem, candidate, **kwargs)

    def review(state: dict[str, Any]) -> dict[str, Any]:
        iteration = state["pending"]["iteration"]
        reviewed.append((iteration, len(evaluated)))  # evaluations done before this candidate's
        return {"notes": [f"reviewed iteration {iteration}"]}

    variants = [submit(softmax_candidate.replace("BLOCK", f"BLOCK{i}")) for i in range(3)]
    result = optimize(softmax_reference, model=ScriptedChatModel(script=variants), evaluator=evaluator,
                      profiler=None, memory=False, device="cpu", iterations=3,
                      extra_nodes=[ExtraNode(name="review", fn=review, after="generate")])
    assert reviewed == [(1, 0), (2, 1), (3, 2)]  # after each generation, before its evaluation
    assert len(evaluated) == 3 and [a.status for a in result.attempts] == ["wrong_output"] * 3
    assert [n for n in result.notes if n.startswith("reviewed")] == [f"reviewed iteration {i}" for i in (1, 2, 3)]


def test_extra_nodes_after_the_same_node_run_in_order_and_the_graph_lists_them():
    first, second = (ExtraNode(name=n, fn=lambda state: {}, after="generate") for n in ("lint", "review"))
    graph = build_kernel_graph(memory=False, extra_nodes=[first, second])
    assert list(graph.nodes) == [*NODE_NAMES, "lint", "review"]
    edges = set(graph.edges)
    assert {("generate", "lint"), ("lint", "review"), ("review", "evaluate")} <= edges
    assert ("generate", "evaluate") not in edges


@pytest.mark.parametrize(("node", "error"), [
    (ExtraNode(name="review", fn=lambda state: {}, after="decide"), "routes conditionally"),
    (ExtraNode(name="review", fn=lambda state: {}, after="nowhere"), "use one of analyze, retrieve"),
    (ExtraNode(name="evaluate", fn=lambda state: {}, after="generate"), "name 'evaluate' is taken"),
])
def test_an_extra_node_that_cannot_be_placed_is_a_clear_error(node: ExtraNode, error: str):
    with pytest.raises(ValueError, match=error):
        build_kernel_graph(memory=False, extra_nodes=[node])


def test_optimize_forwards_every_dependency_the_builder_takes():
    builder = {n for n, p in inspect.signature(build_kernel_graph).parameters.items() if p.kind is p.KEYWORD_ONLY}
    forwarded = set(inspect.signature(optimize).parameters)
    assert builder - forwarded == set()
