"""Discovery, eval-only scoring on the CPU interpreter, and resuming a run killed mid-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from suite_problems import write_candidate, write_problem

from tritonsmith.suite.report import write_report
from tritonsmith.suite.results import RunStore
from tritonsmith.suite.runner import (
    SuiteSettings,
    discover_problems,
    match_candidates,
    optimize_fn_reference,
    run_suite,
)


def test_discovery_keys_levels_and_suite_order(suite_dir: Path, tmp_path: Path) -> None:
    (suite_dir / "level1" / "helpers.py").write_text("X = 1\n")  # not a problem: skipped
    problems = discover_problems([suite_dir])
    assert [(p.key, p.level) for p in problems] == [("level1/1_Relu", 1), ("level1/2_wrong_Add", 1),
                                                    ("level1/10_Tanh", 1), ("level2/4_Scale", 2)]
    assert [p.key for p in discover_problems([suite_dir / "level2"])] == ["level2/4_Scale"]
    assert [p.key for p in discover_problems([suite_dir / "level1" / "10_Tanh.py"])] == ["level1/10_Tanh"]
    with pytest.raises(FileNotFoundError):
        discover_problems([tmp_path / "nowhere"])


def test_candidates_match_by_path_name_or_problem_number(suite_dir: Path, tmp_path: Path) -> None:
    cands = tmp_path / "cands"
    write_candidate(cands / "level1" / "1_Relu.py", "x")
    write_candidate(cands / "10_Tanh.py", "x")
    write_candidate(cands / "level_2_problem_4_sample_0_kernel.py", "x")
    matched = {p.key: p.candidate for p in match_candidates(discover_problems([suite_dir]), cands)}
    assert matched["level1/1_Relu"] == (cands / "level1" / "1_Relu.py").resolve()
    assert matched["level1/10_Tanh"] == (cands / "10_Tanh.py").resolve()
    assert matched["level2/4_Scale"] == (cands / "level_2_problem_4_sample_0_kernel.py").resolve()
    assert matched["level1/2_wrong_Add"] is None


def test_eval_only_scores_a_directory_on_the_cpu_interpreter(tmp_path: Path) -> None:
    refs, cands = tmp_path / "refs" / "level1", tmp_path / "cands"
    write_problem(refs / "1_Relu.py", "torch.relu(x)", rows=7, cols=33)
    write_problem(refs / "2_AddOne.py", "x + 1.0", rows=5, cols=17)
    write_problem(refs / "3_Tanh.py", "torch.tanh(x)", rows=3, cols=129)
    write_candidate(cands / "1_Relu.py", "tl.maximum(x, 0.0)")
    write_candidate(cands / "2_AddOne.py", "x + 2.0")  # wrong on purpose
    problems = match_candidates(discover_problems([refs]), cands)
    run = run_suite(problems, tmp_path / "run", SuiteSettings(mode="eval", device="cpu", trials=2))
    status = {r.key: r.status for r in run.records}
    assert status == {"level1/1_Relu": "correct", "level1/2_AddOne": "wrong_output", "level1/3_Tanh": "no_candidate"}
    report = write_report(run.run_dir)
    assert report.summary.correct == 1 and report.summary.correctness_rate == pytest.approx(1 / 3)
    assert report.summary.fast_p["eager"]["1"] is None  # the interpreter never yields a speedup
    assert all(r.speedup_vs_eager is None for r in run.records)


def test_optimize_fn_must_be_importable_by_name() -> None:
    from suite_fakes import fake_optimize

    assert optimize_fn_reference(fake_optimize) == "suite_fakes:fake_optimize"
    with pytest.raises(ValueError, match="module-level"):
        optimize_fn_reference(lambda problem, **kw: None)


def test_time_budget_stops_starting_problems(suite_dir: Path, tmp_path: Path, fakes_on_path: None) -> None:
    run = run_suite(discover_problems([suite_dir]), tmp_path / "run",
                    SuiteSettings(device="cpu", workers=1, time_budget_s=0.0, optimize_fn="suite_fakes:fake_optimize",
                                  generator="default"))
    assert run.ran == 0 and len(run.not_started) == 4


def _bench(problems: Path, out: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tritonsmith.cli", "bench", str(problems), "--device", "cpu", "--workers", "1",
           "--generator", "builtin", "--optimize-fn", "suite_fakes:fake_optimize", "--out", str(out)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_a_killed_run_resumes_and_skips_finished_problems(tmp_path: Path, fakes_on_path: None) -> None:
    root = tmp_path / "problems"
    for i in range(1, 9):
        write_problem(root / "level1" / f"{i}_P.py", rows=3 + i, cols=5)
    out, calls = tmp_path / "run", tmp_path / "calls.jsonl"
    env = {**os.environ, "SUITE_FAKE_CALLS": str(calls), "SUITE_FAKE_DELAY": "0.4"}
    proc = _bench(root, out, env)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = RunStore(out).finished_keys()
    assert 2 <= len(before) < 8
    # the orphaned worker got SIGTERM from the kernel (PR_SET_PDEATHSIG); with torch loaded (the reference
    # check) its exit takes a moment
    pids = {c["pid"] for c in map(json.loads, calls.read_text().splitlines())}
    gone_by = time.monotonic() + 5.0
    while time.monotonic() < gone_by and not all(_gone(pid) for pid in pids):
        time.sleep(0.1)
    assert all(_gone(pid) for pid in pids)

    rerun = _bench(root, out, env)
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err.decode()[-2000:]
    assert RunStore(out).finished_keys() == {f"level1/{i}_P" for i in range(1, 9)}
    counts: dict[str, int] = {}
    for c in map(json.loads, calls.read_text().splitlines()):
        counts[c["problem"]] = counts.get(c["problem"], 0) + 1
    assert all(counts[k.split("/")[1]] == 1 for k in before)  # finished before the kill: never rerun
    assert sum(counts.values()) <= 8 + 1  # at most the one problem in flight ran twice
    assert (out / "report.md").exists()


def test_a_broken_setup_stops_after_three_runner_errors(tmp_path: Path, fakes_on_path: None) -> None:
    root = tmp_path / "p"
    for i in range(1, 7):
        write_problem(root / "level1" / f"{i}_bug.py", rows=2 + i, cols=3)
    run = run_suite(discover_problems([root]), tmp_path / "run",
                    SuiteSettings(device="cpu", workers=1, optimize_fn="suite_fakes:crashing_optimize",
                                  generator="default"))
    assert run.ran == 3 and len(run.not_started) == 3
    assert all(r.status == "error" for r in run.records)


@pytest.mark.gpu
def test_eval_only_on_one_gpu_times_the_kernel(tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    refs = tmp_path / "refs" / "level1"
    write_problem(refs / "1_Relu.py", rows=4097, cols=1031)
    write_candidate(tmp_path / "cands" / "1_Relu.py", "tl.maximum(x, 0.0)")
    problems = match_candidates(discover_problems([refs]), tmp_path / "cands")
    run = run_suite(problems, tmp_path / "run", SuiteSettings(mode="eval", device="cuda", workers=1, trials=2))
    (record,) = run.records
    assert record.status == "correct", record.message
    assert record.worker.startswith("gpu") and record.speedup_vs_eager is not None and record.speedup_vs_eager > 0
    assert write_report(run.run_dir).summary.timed == 1


def _gone(pid: int) -> bool:
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
