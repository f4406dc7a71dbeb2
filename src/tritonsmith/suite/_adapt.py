"""Turn the optimize loop's ``OptimizeResult`` into the runner's :class:`OptimizeOutcome`."""

from __future__ import annotations

from typing import Any

from tritonsmith.core.results import EvalStatus
from tritonsmith.suite._outcome import OptimizeOutcome

_VERDICTS = {s.value for s in EvalStatus}


def outcome_from_optimize_result(raw: Any) -> OptimizeOutcome:
    """A verified run keeps its best kernel; a run that gave up reports its last attempt's verdict."""
    from tritonsmith.graphs.optimizer import OptimizeResult

    if not isinstance(raw, OptimizeResult):
        raise TypeError(f"the optimize function returned {type(raw).__name__}, not an OptimizeResult/OptimizeOutcome")
    failure_status, failure_message = None, ""
    if raw.best_result is None:
        last = raw.attempts[-1] if raw.attempts else None
        failure_status = last.status if last is not None and last.status in _VERDICTS else None
        failure_message = f"gave up: {raw.reason}" + (f" (last attempt: {last.message})" if last else "")
    return OptimizeOutcome(best_source=raw.best_source, best_result=raw.best_result, iterations=len(raw.attempts),
                           generator=raw.generator, input_tokens=raw.input_tokens, output_tokens=raw.output_tokens,
                           cost_usd=raw.cost_usd, failure_status=failure_status, failure_message=failure_message[:2000],
                           attempts=tuple(a.trail() for a in raw.attempts), slower=raw.slower)
