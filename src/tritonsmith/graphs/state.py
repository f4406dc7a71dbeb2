"""The graph's state: plain JSON-able TypedDicts, so any checkpointer (and LangGraph Studio) can hold it.

Every evaluated attempt stays in ``attempts`` (:class:`~tritonsmith.core.results.Attempt` as its dict: code,
evaluator result, feedback, reward); ``best`` is the
best *verified* attempt so far and is never lost: its reducer only ever replaces it with a better one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from tritonsmith.core.results import GENERATOR_ERROR, MODEL_ERROR, NO_CODE
from tritonsmith.graphs._floor import floor_prefers

__all__ = [
    "AttemptRecord",
    "Decision",
    "GENERATOR_ERROR",
    "KernelInput",
    "KernelState",
    "MODEL_ERROR",
    "NO_CODE",
    "ProblemSpec",
    "Usage",
    "add_usage",
    "keep_best",
    "merge_attempts",
    "merge_notes",
]


class ProblemSpec(TypedDict):
    """A problem, JSON-able: its KernelBench source plus where it came from."""

    source: str
    name: str
    level: NotRequired[int | None]
    path: NotRequired[str | None]
    weights_path: NotRequired[str | None]


AttemptRecord = dict[str, Any]
"""One attempt in the state: :meth:`tritonsmith.core.results.Attempt.to_dict` (read back with
``Attempt.from_dict``). ``pending`` holds one the generator wrote and ``evaluate`` has not judged yet
(``status`` ``""``); ``attempts`` and ``best`` hold judged ones."""

PendingCandidate = AttemptRecord  # the older name of a pending attempt's dict


class Usage(TypedDict):
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    calls: int


class Decision(TypedDict):
    action: Literal["refine", "finish", "give_up"]
    reason: str


def merge_attempts(old: list[AttemptRecord] | None, new: list[AttemptRecord] | AttemptRecord | None) -> list[AttemptRecord]:
    """Append new attempts; an attempt with an iteration already present replaces it (e.g. profiled)."""
    out = list(old or [])
    items = [new] if isinstance(new, dict) else list(new or [])
    for rec in items:
        idx = next((i for i, r in enumerate(out) if r["iteration"] == rec["iteration"]), None)
        if idx is None:
            out.append(rec)
        else:
            out[idx] = rec
    return out


def _rank(rec: AttemptRecord) -> tuple[float, int]:
    return (rec["reward"], -rec["iteration"])


def keep_best(old: AttemptRecord | None, new: AttemptRecord | None) -> AttemptRecord | None:
    """The better verified attempt (higher reward; on a tie the earlier one). Failures never replace it.

    The floor (``_floor.floor_prefers``) overrides the reward where it must: a kernel slower than
    torch.compile beyond noise never stays the best while a verified one faster beyond noise exists (a
    hybrid kernel's reward is discounted, so a slower pure-Triton kernel could outrank it)."""
    if new is None or new["reward"] <= 0.0:
        return old
    if old is None or old["iteration"] == new["iteration"]:
        return new
    floor = floor_prefers(new, old)
    if floor is not None:
        return new if floor else old
    return new if _rank(new) > _rank(old) else old


def add_usage(old: Usage | None, new: Usage | None) -> Usage:
    """Sum token counts and cost (cost stays None until some call was priced)."""
    a = old or Usage(input_tokens=0, output_tokens=0, cost_usd=None, calls=0)
    if not new:
        return a
    costs = [c for c in (a.get("cost_usd"), new.get("cost_usd")) if c is not None]
    return Usage(input_tokens=a["input_tokens"] + new.get("input_tokens", 0),
                 output_tokens=a["output_tokens"] + new.get("output_tokens", 0),
                 cost_usd=sum(costs) if costs else None, calls=a.get("calls", 0) + new.get("calls", 0))


def merge_notes(old: list[str] | None, new: list[str] | str | None) -> list[str]:
    """Append notes once each (a resumed node may say the same thing again)."""
    out = list(old or [])
    for note in [new] if isinstance(new, str) else list(new or []):
        if note not in out:
            out.append(note)
    return out


class KernelInput(TypedDict):
    """What a run starts from: a problem (path, KernelBench source or ProblemSpec) and maybe a kernel."""

    problem: ProblemSpec | str
    start_from: NotRequired[str | None]


class KernelState(TypedDict, total=False):
    """The whole state of one optimisation run."""

    problem: ProblemSpec | str
    start_from: str | None
    analysis: str
    facts: dict[str, Any]
    examples: list[str]
    tuned_variants: list[str]  # the memory's per-shape tuning cache for the built-in generator (retrieve)
    pending: AttemptRecord | None
    exhausted: bool
    attempts: Annotated[list[AttemptRecord], merge_attempts]
    best: Annotated[AttemptRecord | None, keep_best]
    usage: Annotated[Usage, add_usage]
    notes: Annotated[list[str], merge_notes]
    generator: str
    device: str
    decision: Decision
    remembered: list[str]
