"""The suite report's data: its metrics, its scopes and one row per problem (below ``report`` and
``_markdown``, which both read them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from tritonsmith.suite.results import ERROR, STOPPED, ProblemRecord, RunManifest

__all__ = ["BASELINES", "FAST_P", "Metrics", "SuiteReport", "problem_row"]

FAST_P: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile")


@dataclass(frozen=True, kw_only=True)
class Metrics:
    """Summary of one scope (the whole run or one level)."""

    problems: int
    correct: int
    correctness_rate: float
    timed: int
    fast_p: dict[str, dict[str, float | None]]
    geomean: dict[str, float | None]
    runner_errors: int = 0
    stopped: int = 0  # the run's hard stop or Ctrl-C came before the problem's first verdict
    no_compile_baseline: int = 0


@dataclass(frozen=True, kw_only=True)
class SuiteReport:
    run_dir: str
    manifest: RunManifest | None
    records: list[ProblemRecord]
    summary: Metrics
    levels: dict[str, Metrics]
    unfinished: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_dir": self.run_dir,
            "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "run": self.manifest.to_dict() if self.manifest else None,
            "devices": sorted({r.result.device_name for r in self.records if r.result}),
            "summary": asdict(self.summary),
            "levels": {k: asdict(v) for k, v in self.levels.items()},
            "totals": _totals(self.records),
            "unfinished": self.unfinished,
            "invalid_problems": self.invalid,
            "problems": [problem_row(r) for r in self.records],
        }


def problem_row(r: ProblemRecord) -> dict[str, Any]:
    b = r.result.benchmark if r.timed and r.result else None
    return {
        "key": r.key, "level": r.level, "status": r.status, "message": r.message,
        "speedup_vs_eager": r.speedup_vs_eager, "speedup_vs_compile": r.speedup_vs_compile,
        "candidate_ms": b.candidate.median_ms if b else None, "eager_ms": b.eager.median_ms if b else None,
        "compile_ms": b.compiled.median_ms if b and b.compiled else None,
        "spread": b.candidate.spread if b else None, "iterations": r.iterations, "generator": r.generator,
        "input_tokens": r.input_tokens, "output_tokens": r.output_tokens, "cost_usd": r.cost_usd,
        "scaled": r.scaling_note or (r.result.scaling_note if r.result else None), "wall_s": r.wall_s, "overhead_s": r.overhead_s,
        "worker": r.worker, "device": r.device, "candidate_file": r.candidate_file, "version": r.version,
    }


def _totals(records: Sequence[ProblemRecord]) -> dict[str, Any]:
    costs = [r.cost_usd for r in records if r.cost_usd is not None]
    overheads = sorted(r.overhead_s for r in records if r.status not in (ERROR, STOPPED))
    return {"input_tokens": sum(r.input_tokens for r in records), "output_tokens": sum(r.output_tokens for r in records),
            "cost_usd": sum(costs) if costs else None, "wall_s": sum(r.wall_s for r in records),
            "overhead_median_s": overheads[len(overheads) // 2] if overheads else None,
            "overhead_max_s": overheads[-1] if overheads else None}
