"""Reports of a suite run: the field's metrics (correctness, fast_p, geometric-mean speedup) per run and
per level, per-problem rows, plots, and two runs side by side.

Definitions (KernelBench's): over the N problems of a scope, ``fast_p`` is the fraction that are
correct *and* faster than the baseline by more than ``p`` (``fast_0`` is the correctness rate). A
problem without a timing (no GPU, or no torch.compile baseline) is never counted fast for p > 0.
The geometric mean is over the correct, timed problems. Speedups exist only for GPU runs: the CPU
interpreter checks correctness, and its figures are never reported as speedups.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tritonsmith.suite.results import ERROR, INVALID_PROBLEM, ProblemRecord, RunManifest, RunStore, write_atomic

__all__ = ["FAST_P", "Metrics", "SuiteReport", "build_report", "compare_runs", "metrics", "write_report"]

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


def metrics(records: Sequence[ProblemRecord], ps: Sequence[float] = FAST_P) -> Metrics:
    """Correctness rate, fast_p against eager and torch.compile, and geometric-mean speedups."""
    counted = [r for r in records if r.status != INVALID_PROBLEM]
    n = len(counted)
    correct = [r for r in counted if r.ok]
    timed = [r for r in correct if r.timed]
    speedups = {"eager": [r.speedup_vs_eager for r in timed], "compile": [r.speedup_vs_compile for r in timed]}
    fast: dict[str, dict[str, float | None]] = {}
    for base, values in speedups.items():
        fast[base] = {}
        for p in ps:
            if p == 0:
                fast[base][_p_key(p)] = len(correct) / n if n else None
            else:  # without any timing the question has no answer (never "0 % fast")
                fast[base][_p_key(p)] = sum(1 for s in values if s is not None and s > p) / n if n and timed else None
    return Metrics(problems=n, correct=len(correct), correctness_rate=len(correct) / n if n else 0.0,
                   timed=len(timed), fast_p=fast, geomean={b: geomean(v) for b, v in speedups.items()},
                   runner_errors=sum(1 for r in counted if r.status == ERROR),
                   no_compile_baseline=sum(1 for r in timed if r.speedup_vs_compile is None))


def geomean(values: Iterable[float | None]) -> float | None:
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def build_report(run_dir: str | Path) -> SuiteReport:
    """Read a run directory and compute its summary, overall and per level."""
    store = RunStore(run_dir)
    manifest = store.read_manifest()
    records = store.records()
    order = {k: i for i, k in enumerate(manifest.problems)} if manifest else {}
    records.sort(key=lambda r: (order.get(r.key, len(order)), r.key))
    levels: dict[str, list[ProblemRecord]] = {}
    for r in records:
        levels.setdefault(f"level {r.level}" if r.level is not None else "no level", []).append(r)
    finished = {r.key for r in records if r.finished}
    return SuiteReport(run_dir=str(store.run_dir), manifest=manifest, records=records, summary=metrics(records),
                       levels={k: metrics(v) for k, v in sorted(levels.items())},
                       unfinished=[k for k in (manifest.problems if manifest else ()) if k not in finished],
                       invalid=[r.key for r in records if r.status == INVALID_PROBLEM])


def write_report(run_dir: str | Path) -> SuiteReport:
    """Write ``report.md``, ``report.json`` and (for timed runs) ``speedups.png`` and ``fast_p.png``."""
    from tritonsmith.suite._markdown import report_markdown
    from tritonsmith.suite._plots import plot_fast_p, plot_speedups

    report = build_report(run_dir)
    out = Path(run_dir)
    plots = []
    timed = [r for r in report.records if r.timed]
    if timed:
        plots = [plot_speedups(timed, out / "speedups.png"), plot_fast_p(timed, report.summary.problems,
                                                                           out / "fast_p.png")]
    write_atomic(out / "report.json", json.dumps(report.to_dict(), indent=2))
    write_atomic(out / "report.md", report_markdown(report, [p.name for p in plots]))
    return report


def compare_runs(run_a: str | Path, run_b: str | Path) -> dict[str, Any]:
    """Two runs side by side: summaries, and per problem the verdicts, speedups and whether they agree.

    Speedups agree when ``|log(a/b)|`` is within the two runs' measured noise, where a run's noise is
    the relative p20-p80 spread of its candidate timing plus that of its eager timing.
    """
    a, b = build_report(run_a), build_report(run_b)
    rows_a = {r.key: r for r in a.records}
    rows_b = {r.key: r for r in b.records}
    rows = []
    for key in list(rows_a) + [k for k in rows_b if k not in rows_a]:
        ra, rb = rows_a.get(key), rows_b.get(key)
        sa = ra.speedup_vs_eager if ra else None
        sb = rb.speedup_vs_eager if rb else None
        noise = _noise(ra) + _noise(rb)
        agree_speed = None if sa is None or sb is None else abs(math.log(sa / sb)) <= noise
        rows.append({"key": key, "status_a": ra.status if ra else None, "status_b": rb.status if rb else None,
                     "speedup_a": sa, "speedup_b": sb, "ratio_b_over_a": sb / sa if sa and sb else None,
                     "noise": noise if sa and sb else None, "same_verdict": bool(ra and rb and ra.status == rb.status),
                     "speedups_agree": agree_speed})
    both = [r for r in rows if r["status_a"] and r["status_b"]]
    timed_both = [r for r in both if r["speedups_agree"] is not None]
    return {"run_a": a.run_dir, "run_b": b.run_dir, "summary_a": asdict(a.summary), "summary_b": asdict(b.summary),
            "problems_in_both": len(both), "same_verdict": sum(r["same_verdict"] for r in both),
            "timed_in_both": len(timed_both), "speedups_agree": sum(bool(r["speedups_agree"]) for r in timed_both),
            "rows": rows}


def write_comparison(run_a: str | Path, run_b: str | Path) -> tuple[Path, dict[str, Any]]:
    """Write ``compare_<b>.md`` and ``.json`` into ``run_a``; returns the Markdown path and the data."""
    from tritonsmith.suite._markdown import comparison_markdown

    data = compare_runs(run_a, run_b)
    stem = f"compare_{Path(run_b).resolve().name}"
    write_atomic(Path(run_a) / f"{stem}.json", json.dumps(data, indent=2))
    md = Path(run_a) / f"{stem}.md"
    write_atomic(md, comparison_markdown(data))
    return md, data


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
    overheads = sorted(r.overhead_s for r in records if r.status != ERROR)
    return {"input_tokens": sum(r.input_tokens for r in records), "output_tokens": sum(r.output_tokens for r in records),
            "cost_usd": sum(costs) if costs else None, "wall_s": sum(r.wall_s for r in records),
            "overhead_median_s": overheads[len(overheads) // 2] if overheads else None,
            "overhead_max_s": overheads[-1] if overheads else None}


def _noise(r: ProblemRecord | None) -> float:
    if r is None or not r.timed or r.result is None or r.result.benchmark is None:
        return 0.0
    b = r.result.benchmark
    return b.candidate.spread + b.eager.spread


def _p_key(p: float) -> str:
    return f"{p:g}"
