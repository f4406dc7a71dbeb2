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
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tritonsmith.suite._markdown import comparison_markdown, report_markdown
from tritonsmith.suite._report_model import FAST_P, Metrics, SuiteReport
from tritonsmith.suite.results import ERROR, INVALID_PROBLEM, STOPPED, ProblemRecord, RunStore, write_atomic

__all__ = ["FAST_P", "Metrics", "SuiteReport", "build_report", "compare_runs", "metrics", "write_report"]


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
                   stopped=sum(1 for r in counted if r.status == STOPPED),
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

    data = compare_runs(run_a, run_b)
    stem = f"compare_{Path(run_b).resolve().name}"
    write_atomic(Path(run_a) / f"{stem}.json", json.dumps(data, indent=2))
    md = Path(run_a) / f"{stem}.md"
    write_atomic(md, comparison_markdown(data))
    return md, data


def _noise(r: ProblemRecord | None) -> float:
    if r is None or not r.timed or r.result is None or r.result.benchmark is None:
        return 0.0
    b = r.result.benchmark
    return b.candidate.spread + b.eager.spread


def _p_key(p: float) -> str:
    return f"{p:g}"
