"""``OptimizeResult.to_dict`` (report.json) lists each attempt's summary view and reads back, also an old report."""

from __future__ import annotations

import json
from pathlib import Path

from tritonsmith.core.results import Attempt, EvalStatus
from tritonsmith.graphs.optimizer import OptimizeResult

RECORDED = Path(__file__).resolve().parents[2] / "benchmarks/results/h200-2026-12-04/mainjob/report.json"


def test_a_report_written_before_attempts_were_one_type_still_loads() -> None:
    data = json.loads(RECORDED.read_text())
    result = OptimizeResult.from_dict(data)
    assert result.ok and result.best_result is not None and result.best_result.status is EvalStatus.CORRECT
    assert len(result.attempts) == len(data["attempts"]) and all(isinstance(a, Attempt) for a in result.attempts)
    first = data["attempts"][0]
    assert result.attempts[0].speedup == first["speedup"] and result.attempts[0].source == first["source"]
    again = result.to_dict()
    for old, new in zip(data["attempts"], again["attempts"], strict=True):
        assert {k: new[k] for k in old} == old  # the same fields say the same (new ones: torch_ops, error)
    assert OptimizeResult.from_dict(json.loads(json.dumps(again))) == result
