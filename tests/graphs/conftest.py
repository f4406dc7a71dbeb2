"""Fixtures for the graph tests: a clean environment, candidate variants, a counting evaluator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from replay_server import replay  # noqa: F401 - the local OpenAI-compatible server fixture

from tritonsmith.core.settings import ENV
from tritonsmith.evaluator._evaluate import evaluate

WRONG_LINE = ("out = num / tl.sum(num, axis=0)", "out = num / (tl.sum(num, axis=0) + 1.0)")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key, no server, no on-disk memory from the developer's shell."""
    for names in ENV.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.setenv("TRITONSMITH_USE_MEMORY", "0")


@pytest.fixture
def wrong_candidate(softmax_candidate: str) -> str:
    """Runs, but divides by (sum + 1): wrong values everywhere."""
    assert WRONG_LINE[0] in softmax_candidate
    return softmax_candidate.replace(*WRONG_LINE)


@pytest.fixture
def syntax_error_candidate() -> str:
    return ("import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"
            "class ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n")


class CountingEvaluator:
    """The real evaluator, counting calls (to prove what a resumed run did not redo)."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    def __call__(self, problem: Any, candidate: str, **kwargs: Any) -> Any:
        self.sources.append(candidate)
        return evaluate(problem, candidate, **kwargs)


@pytest.fixture
def counting_evaluator() -> Iterator[CountingEvaluator]:
    yield CountingEvaluator()
