from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonsmith.core.results import BenchmarkReport, EvalResult, EvalStatus, Timing
from tritonsmith.suite.results import ERROR, ProblemRecord, RunConfigError, RunManifest, RunStore


def _record(key: str, status: str = "correct", **kw: object) -> ProblemRecord:
    return ProblemRecord(key=key, problem=key.split("/")[-1], level=1, status=status, message="m", mode="optimize",
                         device="cuda", **kw)  # type: ignore[arg-type]


def test_records_round_trip_with_a_full_eval_result(tmp_path: Path) -> None:
    bench = BenchmarkReport(candidate=Timing(median_ms=1.25, p20_ms=1.2, p80_ms=1.3, reps=17),
                            eager=Timing(median_ms=2.5, p20_ms=2.4, p80_ms=2.6, reps=17), compiled=None,
                            compile_mode="default", compiled_note="compile failed")
    result = EvalResult(status=EvalStatus.CORRECT, message="ok", problem="p", device="cuda", device_name="H200",
                        tolerance="kernelbench", benchmark=bench)
    store = RunStore(tmp_path)
    store.append(_record("level1/p", result=result, input_tokens=11, cost_usd=0.5))
    (back,) = RunStore(tmp_path).records()
    assert back.result == result
    assert back.speedup_vs_eager == pytest.approx(2.0)
    assert back.speedup_vs_compile is None
    assert back.input_tokens == 11 and back.cost_usd == 0.5


def test_last_record_wins_and_errors_are_not_finished(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.append(_record("a", status=ERROR))
    store.append(_record("b", status="wrong_output"))
    assert store.finished_keys() == {"b"}
    store.append(_record("a"))
    assert store.finished_keys() == {"a", "b"}
    assert [r.status for r in store.records()] == ["wrong_output", "correct"]


def test_a_torn_last_line_is_ignored_then_cut_before_the_next_append(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.append(_record("a"))
    with open(store.results_path, "ab") as f:
        f.write(b'{"key": "b", "probl')  # killed mid-write
    assert [r.key for r in RunStore(tmp_path).records()] == ["a"]
    fresh = RunStore(tmp_path)
    fresh.append(_record("c"))
    lines = store.results_path.read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["a", "c"]


def test_resuming_with_other_settings_is_refused(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.open_run(RunManifest(mode="optimize", device="cuda", generator="builtin", iterations=3, problems=("a",)))
    merged = store.open_run(RunManifest(mode="optimize", device="cuda", generator="builtin", iterations=3,
                                        problems=("b", "a")))
    assert merged.problems == ("a", "b")
    with pytest.raises(RunConfigError, match="another --out"):
        store.open_run(RunManifest(mode="optimize", device="cuda", generator="llm", iterations=3, problems=("a",)))


def test_a_run_resumes_across_commits_that_leave_the_package_alone(tmp_path: Path) -> None:
    """Code counts by the package's source digest: a docs or results commit between the calls of a GPU run
    lets it resume (H200 2026-12-06: level 3 needed four calls); a changed source line does not."""
    store = RunStore(tmp_path / "run")
    base = dict(mode="optimize", device="cuda", generator="builtin", iterations=2, problems=("level3/1_MLP",))
    store.open_run(RunManifest(**base, version="0.1.0+ge8447bd.s81fb8137"))
    store.open_run(RunManifest(**base, version="0.1.0+g9220711.dirty.s81fb8137"))  # same sources: resumes
    with pytest.raises(RunConfigError, match=r"version: was '0.1.0\+ge8447bd.s81fb8137', now '0.1.0\+g0fe0148.s1234abcd'"):
        store.open_run(RunManifest(**base, version="0.1.0+g0fe0148.s1234abcd"))
    with pytest.raises(RunConfigError):
        store.open_run(RunManifest(**base, version="0.1.0"))  # no digest to compare: the whole string counts


def test_cpu_records_never_carry_a_speedup(tmp_path: Path) -> None:
    t = Timing(median_ms=1.0, p20_ms=1.0, p80_ms=1.0, reps=3)
    result = EvalResult(status=EvalStatus.CORRECT, message="ok", problem="p", device="cpu", device_name="cpu",
                        tolerance="kernelbench",
                        benchmark=BenchmarkReport(candidate=t, eager=t, compiled=t, compile_mode="default"))
    rec = ProblemRecord(key="p", problem="p", level=None, status="correct", message="", mode="eval", device="cpu",
                        result=result)
    assert rec.ok and not rec.timed and rec.speedup_vs_eager is None
