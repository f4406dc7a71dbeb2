"""Ctrl-C (a real SIGINT) against a long-running evaluation: exit 130 within 5 s, finished work written,
the evaluator's worker (in a session of its own) killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tritonsmith.examples import example_path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from slow_optimize import slow_kernel  # noqa: E402


def _cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tritonsmith.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait_for(path: Path, proc: subprocess.Popen[str], limit_s: float = 240.0) -> int:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not (path.exists() and path.read_text().strip()):
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)
    assert path.exists(), "the slow candidate never started"
    return int(path.read_text())


def _interrupt(proc: subprocess.Popen[str]) -> tuple[float, str]:
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running 30 s after SIGINT: {proc.communicate()[0][-2000:]}")
    return time.monotonic() - start, out


def _dead(pid: int) -> bool:
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITONSMITH_", "OPENAI_"))}
    env.update(TRITONSMITH_MEMORY_DIR=str(tmp_path / "memory"), TRITONSMITH_PROFILE="0", **extra)
    return env


@pytest.mark.slow
def test_sigint_stops_optimize_during_an_evaluation_and_writes_the_report(tmp_path: Path) -> None:
    pid_file, out = tmp_path / "worker.pid", tmp_path / "out"
    kernel = tmp_path / "slow_kernel.py"
    kernel.write_text(slow_kernel(pid_file))
    proc = _cli("optimize", str(example_path("softmax_reference.py")), "--from", str(kernel), "--device", "cpu",
                "--trials", "1", "--no-memory", "--out", str(out), env=_env(tmp_path))
    worker = _wait_for(pid_file, proc)
    took, output = _interrupt(proc)
    assert proc.returncode == 130, output
    assert took < 5.0, f"exit took {took:.1f} s"
    assert _dead(worker), "the evaluator's worker outlived Ctrl-C"
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "interrupted" and "interrupted (Ctrl-C) after 0 finished attempts" in report["reason"]
    assert (out / "report.md").read_text().startswith("# tritonsmith optimize: softmax_reference")
    kept = [line for line in output.splitlines() if line.startswith("interrupted")]
    assert kept == [f"interrupted: kept 0 finished attempts in {out} (report.json, report.md)"], output


@pytest.mark.slow
def test_sigint_stops_bench_keeps_finished_problems_and_a_rerun_resumes(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    reference = example_path("softmax_reference.py").read_text()
    (problems / "1_fast.py").write_text(reference)
    (problems / "2_slow.py").write_text(reference)
    pid_file, out = tmp_path / "worker.pid", tmp_path / "run"
    env = _env(tmp_path, SLOW_PID_FILE=str(pid_file),
               PYTHONPATH=os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p))
    args = ("bench", str(problems), "--device", "cpu", "--workers", "1", "--trials", "1",
            "--optimize-fn", "slow_optimize:slow_optimize", "--out", str(out))
    proc = _cli(*args, env=env)
    worker = _wait_for(pid_file, proc)
    took, output = _interrupt(proc)
    assert proc.returncode == 130, output
    assert took < 5.0, f"exit took {took:.1f} s"
    time.sleep(0.5)  # the suite worker (SIGTERM) kills the evaluator's group before it exits
    assert _dead(worker), "the evaluator's worker outlived Ctrl-C"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["key"], r["status"]) for r in rows] == [("1_fast", "correct")]
    assert (out / "kernels" / "1_fast.py").is_file() and (out / "report.md").is_file()
    assert "interrupted: kept 1 finished problem in" in output and "rerun the same command to resume" in output
    pid_file.unlink()
    env["SLOW_PID_FILE"] = str(tmp_path / "unused.pid")
    rerun = _cli(*args[:-2], "--out", str(out), "--trials", "2", env=env)  # other settings: refused
    text = rerun.communicate(timeout=120)[0]
    assert rerun.returncode == 2 and "trials: was 1, now 2" in text and "--force-new" in text, text


def test_a_second_sigint_during_the_cleanup_exits_at_once() -> None:
    script = """
import os, signal, time
from tritonsmith.cli._interrupt import interruptible
with interruptible():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
    except KeyboardInterrupt:
        print("cleaning up", flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
        print("cleanup finished", flush=True)
"""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stdout == "cleaning up\n" and time.monotonic() - start < 20


def test_after_ctrl_c_no_new_evaluation_starts_until_workers_are_allowed_again() -> None:
    from tritonsmith.evaluator.sandbox._sandbox import allow_workers, kill_running_workers
    from tritonsmith.evaluator import evaluate

    reference, candidate = example_path("softmax_reference.py"), example_path("softmax_triton.py")
    kill_running_workers(stop=True)  # what the Ctrl-C handler does
    try:
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            evaluate(reference, candidate, device="cpu", trials=1)
        assert time.monotonic() - start < 60  # refused once launched, not run to the end
    finally:
        allow_workers()
    assert evaluate(reference, candidate, device="cpu", trials=1).ok


def test_an_interrupted_run_with_a_verified_attempt_writes_a_kernel_that_passes_eval(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tritonsmith.cli import app
    from tritonsmith.cli.optimize import write_outputs
    from tritonsmith.core.settings import Settings
    from tritonsmith.graphs.nodes import _record, spec_from_problem
    from tritonsmith.graphs.optimizer import _interrupted
    from tritonsmith.evaluator import evaluate

    reference, source = example_path("softmax_reference.py"), example_path("softmax_triton.py").read_text()
    verified = _record({"iteration": 1, "generator": "builtin", "source": source, "note": "", "variant": None},
                       evaluate(reference, source, device="cpu", trials=1), feedback="")
    state = {"problem": spec_from_problem(reference), "attempts": [verified], "best": verified, "device": "cpu",
             "generator": "builtin"}
    result = _interrupted(state, Settings.resolve({"device": "cpu"}))  # what Ctrl-C after iteration 1 leaves
    assert result.status == "verified" and result.reason == "interrupted (Ctrl-C) after 1 finished attempt"
    written = write_outputs(result, tmp_path, reference=reference)
    assert [p.name for p in written] == ["softmax_reference_triton.py", "softmax_reference_reference.py",
                                         "check_softmax_reference.py", "report.json", "report.md"]
    res = CliRunner().invoke(app, ["eval", str(written[1]), str(written[0]), "--device", "cpu", "--trials", "1"])
    assert res.exit_code == 0, res.output


@pytest.mark.slow
def test_sigint_before_the_first_evaluation_exits_at_once_and_no_worker_starts_later(tmp_path: Path) -> None:
    """Ctrl-C while the loop waits for the evaluator's zygote to start: LangGraph's thread is left behind, the
    process exits at once, and no evaluator worker starts on the way out."""
    pid_file, kernel = tmp_path / "worker.pid", tmp_path / "slow_kernel.py"
    kernel.write_text(slow_kernel(pid_file))
    env = _env(tmp_path, PYTHONUNBUFFERED="1", TRITONSMITH_EVAL_ZYGOTE="1")
    proc = _cli("optimize", str(example_path("softmax_reference.py")), "--from", str(kernel), "--device", "cpu",
                "--trials", "1", "--no-memory", "--out", str(tmp_path / "out"), env=env)
    assert proc.stdout is not None
    for line in proc.stdout:  # the reference checked: the loop starts, the zygote is importing torch
        if line.startswith("  reference: runs"):
            break
    took, output = _interrupt(proc)
    assert proc.returncode == 130 and took < 5.0, (took, output)
    assert "interrupted" in output
    time.sleep(20)  # longer than the zygote's imports: a worker refused on the way out would have started by now
    assert not pid_file.exists() or _dead(int(pid_file.read_text() or 0)), "a worker started after Ctrl-C"
