"""The contract every generator (built-in or LLM) fulfils inside the refinement loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tritonsmith.core.problem import Problem
from tritonsmith.core.results import Attempt

__all__ = ["Attempt", "Candidate", "GenerationRequest", "Generator", "TokenUsage"]


@dataclass(frozen=True, kw_only=True)
class GenerationRequest:
    """Everything a generator may use to write the next candidate."""

    problem: Problem
    iteration: int
    history: Sequence[Attempt] = ()
    examples: Sequence[str] = ()
    analysis: str = ""
    device: str = "cuda"
    start_from: str | None = None
    policy: str = "hybrid"
    iterations_left: int | None = None  # iterations the run has after this one (None: not known)
    # the evaluator runs ``problem.scaled()`` (``--scale``): a generator that writes for the reference's
    # shapes (the built-in one) writes for those
    scale: bool = False
    # variants of the built-in generator measured fastest for exactly this problem on this device (the kernel
    # memory's per-shape tuning cache, fastest first): it tries them before its own order
    tuned_variants: Sequence[str] = ()


@dataclass(frozen=True, kw_only=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A generator's answer. ``source`` is None when it had nothing to offer; ``note`` says why.

    ``error`` holds the traceback when the generator itself failed (a bug of ours, not a limitation): the
    attempt is recorded with status ``error`` and the loop goes on.
    """

    source: str | None
    note: str = ""
    variant: str | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    exhausted: bool = False
    model_error: str | None = None  # the chat model failed (HTTP error, timeout, malformed reply): what happened
    model_error_fatal: bool = False  # retrying cannot help (bad key, unknown model, unreachable server)
    error: str | None = None  # our own generator failed (a bug): its traceback


@runtime_checkable
class Generator(Protocol):
    """Writes ``ModelNew`` candidates. ``exhausted=True`` in a Candidate means it has no further ideas."""

    name: str

    def generate(self, request: GenerationRequest) -> Candidate: ...
