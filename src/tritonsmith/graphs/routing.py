"""Where the loop goes after each evaluation: refine, finish with the best verified kernel, or give up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from tritonsmith.core.settings import Settings
from tritonsmith.graphs.state import MODEL_ERROR, AttemptRecord, Decision, KernelState

__all__ = ["Route", "decide", "generated_count", "route_after_decide", "target_reached"]

Route = Literal["generate", "remember", "__end__"]


def generated_count(attempts: Sequence[AttemptRecord]) -> int:
    """Attempts that spent an iteration (a user's ``--from`` kernel and the model server's failures do not:
    repeated model errors end the run on their own, see :func:`decide`)."""
    return sum(1 for a in attempts if a["generator"] != "user" and a["status"] != MODEL_ERROR)


def target_reached(best: AttemptRecord | None, settings: Settings) -> tuple[bool, str]:
    """Whether the best verified kernel is good enough to stop, and why.

    Without a GPU timing nothing faster can be recognised, so a verified kernel ends the run; with a
    timing, the run stops early only when ``target_speedup`` is set and reached.
    """
    if best is None:
        return False, "no verified kernel yet"
    if best["reward_basis"] == "unmeasured":
        return True, "speed is unmeasured here (no GPU timing), so refining cannot be judged"
    target = settings.target_speedup
    speedup = best["speedup"]
    if target is not None and speedup is not None and speedup >= target:
        return True, f"target reached: {speedup:.2f}x vs {best['reward_basis']} (target {target:.2f}x)"
    return False, "verified, looking for a faster kernel"


def decide(state: KernelState, settings: Settings) -> Decision:
    """Refine while iterations remain and the target is not reached; else finish or give up."""
    attempts = state.get("attempts", [])
    best = state.get("best")
    used = generated_count(attempts)
    done, why = target_reached(best, settings)
    if done:
        return Decision(action="finish", reason=why)
    if state.get("exhausted"):
        return _stop(best, f"the generator has no further ideas after {used} iteration(s)", attempts)
    if (why_model := _model_failing(attempts)) is not None:
        return _stop(best, why_model, attempts)
    if used >= settings.iterations:
        return _stop(best, f"iteration limit reached ({used}/{settings.iterations})", attempts)
    return Decision(action="refine", reason=f"{why}; iteration {used + 1} of {settings.iterations} next")


def _model_failing(attempts: Sequence[AttemptRecord]) -> str | None:
    """Why to stop asking the model: an error retrying cannot fix, or two model errors in a row."""
    last = attempts[-1] if attempts else None
    if last is None or last["status"] != MODEL_ERROR:
        return None
    if last.get("model_error_fatal"):
        return "the model server cannot serve this run (another request would fail the same way)"
    if len(attempts) >= 2 and attempts[-2]["status"] == MODEL_ERROR:
        return "the model server failed twice in a row"
    return None


def _stop(best: AttemptRecord | None, why: str, attempts: Sequence[AttemptRecord]) -> Decision:
    if best is not None:
        return Decision(action="finish", reason=f"{why}; best verified kernel: iteration {best['iteration']}")
    last = attempts[-1] if attempts else None
    tail = f"; last attempt: {last['status']}: {last['message']}" if last else ""
    return Decision(action="give_up", reason=f"{why} without a verified kernel{tail}")


def route_after_decide(state: KernelState) -> Route:
    """``decide`` -> ``generate`` (refine), ``remember`` (finish) or the end (give up)."""
    action = state["decision"]["action"]
    if action == "refine":
        return "generate"
    if action == "finish":
        return "remember"
    return "__end__"
