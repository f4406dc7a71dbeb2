"""Report metrics against numbers worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritonsmith.cli import app
from tritonsmith.core.results import BenchmarkReport, EvalResult, EvalStatus, Timing
from tritonsmith.suite.report import build_report, compare_runs, metrics, write_report
from tritonsmith.suite.results import INVALID_PROBLEM, STOPPED, ProblemRecord, RunManifest, RunStore


def _t(ms: float, spread: float = 0.0) -> Timing:
    return Timing(median_ms=ms, p20_ms=ms * (1 - spread / 2), p80_ms=ms * (1 + spread / 2), reps=20)


def _rec(key: str, level: int, status: str = "correct", cand: float | None = None, eager: float | None = None,
         comp: float | None = None, spread: float = 0.0, device: str = "cuda") -> ProblemRecord:
    bench = None
    if cand is not None and eager is not None:
        bench = BenchmarkReport(candidate=_t(cand, spread), eager=_t(eager, spread),
                                compiled=_t(comp) if comp else None, compile_mode="default")
    result = EvalResult(status=EvalStatus(status), message=status, problem=key, device=device, device_name="H200",
                        tolerance="kernelbench", benchmark=bench) if status != INVALID_PROBLEM else None
    return ProblemRecord(key=key, problem=key, level=level, status=status, message=status, mode="optimize",
                         device=device, result=result, iterations=3)


# speedups vs eager / vs compile: p1 2.0 / 1.5, p2 1.2 / 0.8, p3 3.0 / none, p6 0.5 / 0.6; p4 wrong; p5 invalid
RECORDS = [
    _rec("p1", 1, cand=1.0, eager=2.0, comp=1.5),
    _rec("p2", 1, cand=1.0, eager=1.2, comp=0.8),
    _rec("p3", 1, cand=1.1, eager=3.3),
    _rec("p4", 1, status="wrong_output"),
    _rec("p5", 1, status=INVALID_PROBLEM),
    _rec("p6", 2, cand=1.0, eager=0.5, comp=0.6),
]


def test_summary_metrics_match_hand_computed_values() -> None:
    m = metrics(RECORDS)
    assert (m.problems, m.correct, m.timed) == (5, 4, 4)
    assert m.correctness_rate == pytest.approx(0.8)
    assert m.fast_p["eager"] == pytest.approx({"0": 0.8, "1": 0.6, "1.5": 0.4, "2": 0.2})  # 2.0 is not > 2
    assert m.fast_p["compile"] == pytest.approx({"0": 0.8, "1": 0.2, "1.5": 0.0, "2": 0.0})  # 1.5 is not > 1.5
    assert m.geomean["eager"] == pytest.approx((2.0 * 1.2 * 3.0 * 0.5) ** 0.25)
    assert m.geomean["compile"] == pytest.approx((1.5 * 0.8 * 0.6) ** (1 / 3))
    assert m.no_compile_baseline == 1


def test_per_level_metrics_and_written_report(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.open_run(RunManifest(mode="optimize", device="cuda", generator="builtin", iterations=3,
                               problems=tuple(r.key for r in RECORDS) + ("p7",)))
    for r in RECORDS:
        store.append(r)
    report = write_report(tmp_path)
    l1, l2 = report.levels["level 1"], report.levels["level 2"]
    assert (l1.problems, l1.correct) == (4, 3)
    assert l1.fast_p["eager"]["1.5"] == pytest.approx(2 / 4)
    assert l1.geomean["eager"] == pytest.approx((2.0 * 1.2 * 3.0) ** (1 / 3))
    assert l2.geomean["compile"] == pytest.approx(0.6)
    assert report.unfinished == ["p7"] and report.invalid == ["p5"]
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["summary"]["fast_p"]["eager"]["1"] == pytest.approx(0.6)
    assert [row["key"] for row in data["problems"]] == ["p1", "p2", "p3", "p4", "p5", "p6"]
    md = (tmp_path / "report.md").read_text()
    assert "| all | 5 | 4 (80.0%) | 80.0% | 60.0% | 40.0% | 20.0% | 1.38x (4) |" in md
    for png in ("speedups.png", "fast_p.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in md


def test_report_says_when_a_resumed_run_mixes_code_versions(tmp_path: Path) -> None:
    from dataclasses import replace

    store = RunStore(tmp_path)
    for r in RECORDS[:2]:
        store.append(r)
    assert RECORDS[0].version.startswith("0.")  # stamped with this checkout's version when made
    write_report(tmp_path)
    assert "different tritonsmith versions" not in (tmp_path / "report.md").read_text()
    store.append(replace(RECORDS[5], version="0.0.9+gabc1234"))
    report = write_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert f"`{RECORDS[0].version}` (2), `0.0.9+gabc1234` (1)" in md
    assert [row["version"] for row in report.to_dict()["problems"]][-1] == "0.0.9+gabc1234"


def test_a_stopped_problem_counts_as_not_verified_and_is_named_apart_from_runner_errors(tmp_path: Path) -> None:
    """A problem the run's hard stop cut before any verdict is `stopped`: not verified in every metric, retried on
    resume, and the report says so without calling it a failure of the runner."""
    store = RunStore(tmp_path)
    store.append(RECORDS[0])
    stopped = ProblemRecord(key="p9", problem="p9", level=1, status=STOPPED, mode="optimize", device="cuda",
                            message="the run was stopped (its hard stop or Ctrl-C) after 0 finished attempts",
                            result=None, iterations=0)
    store.append(stopped)
    report = write_report(tmp_path)
    assert (report.summary.problems, report.summary.correct) == (2, 1)
    assert (report.summary.stopped, report.summary.runner_errors) == (1, 0)
    assert not stopped.finished and store.finished_keys() == {"p1"}
    md = (tmp_path / "report.md").read_text()
    assert "1 problems were stopped (status `stopped`" in md and "failed inside the runner" not in md


def test_cpu_run_reports_correctness_only(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for r in (_rec("a", 1, cand=1.0, eager=5.0, device="cpu"), _rec("b", 1, status="compile_error", device="cpu")):
        store.append(r)
    report = write_report(tmp_path)
    assert report.summary.correctness_rate == pytest.approx(0.5)
    assert report.summary.fast_p["eager"] == {"0": 0.5, "1": None, "1.5": None, "2": None}
    assert report.summary.geomean == {"eager": None, "compile": None}
    assert not (tmp_path / "speedups.png").exists()
    assert "5.00x" not in (tmp_path / "report.md").read_text()


def test_compare_runs_checks_verdicts_and_speedups_within_noise(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for r in (_rec("x", 1, cand=1.0, eager=2.0, spread=0.04), _rec("y", 1, cand=1.0, eager=2.0, spread=0.02),
              _rec("z", 1, status="wrong_output")):
        RunStore(a).append(r)
    # x: 2.0 vs 2.1 (log ratio 0.049 <= noise 0.08 + 0.08); y: 2.0 vs 2.5 (0.223 > 0.04 + 0.04)
    for r in (_rec("x", 1, cand=1.0, eager=2.1, spread=0.04), _rec("y", 1, cand=1.0, eager=2.5, spread=0.02),
              _rec("z", 1, cand=1.0, eager=1.0)):
        RunStore(b).append(r)
    data = compare_runs(a, b)
    rows = {r["key"]: r for r in data["rows"]}
    assert rows["x"]["speedups_agree"] is True and rows["x"]["noise"] == pytest.approx(0.16)
    assert rows["y"]["speedups_agree"] is False
    assert rows["y"]["ratio_b_over_a"] == pytest.approx(1.25)
    assert rows["z"]["same_verdict"] is False and rows["z"]["speedups_agree"] is None
    assert (data["problems_in_both"], data["same_verdict"], data["timed_in_both"], data["speedups_agree"]) == (3, 2, 2, 1)
    assert math.isclose(data["summary_b"]["correctness_rate"], 1.0)
    result = CliRunner().invoke(app, ["report", str(a), "--compare", str(b)])
    assert result.exit_code == 0, result.output
    assert "same verdict on 2 of 3" in result.output
    assert "**no**" in (a / "compare_b.md").read_text()
    assert build_report(a).summary.problems == 3
