"""The optimize loop's result as the suite runner records it: best kernel, verdict and the attempt trail."""

from __future__ import annotations

from tritonsmith.core.results import Attempt
from tritonsmith.graphs.optimizer import OptimizeResult
from tritonsmith.suite._adapt import outcome_from_optimize_result
from tritonsmith.suite.results import ProblemRecord


def _attempt(i: int, variant: str, status: str, message: str) -> Attempt:
    return Attempt(iteration=i, generator="builtin", status=status, message=message, reward=0.0,
                   reward_basis="compile", speedup=None, source="src", variant=variant)


def test_gave_up_run_keeps_last_verdict_and_every_attempt() -> None:
    raw = OptimizeResult(problem="p", status="gave_up", reason="iteration limit reached", device="cuda",
                         generator="builtin", best_source=None, best_result=None, best_reward=None,
                         best_iteration=None, attempts=(_attempt(1, "default", "wrong_output", "x" * 500),
                                                        _attempt(2, "ieee", "rejected", "precision_lowered")))
    out = outcome_from_optimize_result(raw)
    assert out.failure_status == "rejected" and "last attempt: precision_lowered" in out.failure_message
    assert [a["variant"] for a in out.attempts] == ["default", "ieee"]
    assert len(out.attempts[0]["message"]) == 300 and "source" not in out.attempts[0]
    record = ProblemRecord(key="level1/p", problem="p", level=1, status="rejected", message="m", mode="optimize",
                           device="cuda", attempts=out.attempts)
    again = ProblemRecord.from_dict(record.to_dict())
    assert again.attempts == out.attempts
    # rows written before attempts were recorded still load
    old = record.to_dict()
    del old["attempts"]
    assert ProblemRecord.from_dict(old).attempts == ()


def test_generator_errors_stay_visible_in_the_suite_record() -> None:
    """A generator bug is an ``error`` attempt: the suite goes on, the record's message and trail name it."""
    raw = OptimizeResult(problem="p", status="gave_up", reason="the generator has no further ideas", device="cuda",
                         generator="builtin", best_source=None, best_result=None, best_reward=None,
                         best_iteration=None,
                         attempts=(_attempt(1, "default", "error", "builtin: internal error in variant default: "
                                                                   "IndexError: tuple index out of range"),))
    out = outcome_from_optimize_result(raw)
    assert out.failure_status is None  # not an evaluator verdict: the runner records no_candidate
    assert "IndexError: tuple index out of range" in out.failure_message
    assert out.attempts[0]["status"] == "error"


def test_a_results_jsonl_row_of_an_earlier_run_loads_with_its_trail() -> None:
    import json
    from pathlib import Path

    recorded = Path(__file__).resolve().parents[2] / "benchmarks/results/h200-2026-12-04/suite/results.jsonl"
    rows = [json.loads(line) for line in recorded.read_text().splitlines() if line.strip()]
    row = next(r for r in rows if len(r.get("attempts") or ()) >= 2)
    record = ProblemRecord.from_dict(row)
    assert list(record.to_dict()["attempts"]) == row["attempts"]
    trail = record.trail
    assert all(isinstance(a, Attempt) and a.source is None for a in trail)
    assert [a.speedup for a in trail] == [a["speedup_vs_compile"] for a in row["attempts"]]
    assert tuple(a.trail() for a in trail) == record.attempts
