"""What one optimize call gives the suite runner (below ``_task`` and ``_adapt``, which both need it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonsmith.core.results import EvalResult

__all__ = ["OptimizeOutcome"]


@dataclass(frozen=True, kw_only=True)
class OptimizeOutcome:
    """What the runner needs from one optimize call: the best candidate and what it cost."""

    best_source: str | None
    best_result: EvalResult | None
    iterations: int
    generator: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    failure_status: str | None = None
    failure_message: str = ""
    attempts: tuple[dict[str, Any], ...] = ()  # each attempt's Attempt.trail() view
    slower: str | None = None  # the best verified kernel loses to torch.compile beyond noise (graphs._floor)
