"""The worker sandbox on both launch paths: forked by a zygote (default) and spawned (opt-out).

Each path must contain a segfault, ``os._exit`` and a hang (killing the candidate's children), and the
next evaluation must work. Zygote-specific: the zygote survives its jobs, a dead zygote is replaced, an
unsafe one is never forked from, the worker runs in its own session without the zygote's socket, and a
zygote whose caller is gone exits.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tritonsmith.evaluator.sandbox import _sandbox, _zygote
from tritonsmith.core.results import EvalStatus
from tritonsmith.evaluator._evaluate import _worker_env, evaluate

LAUNCHERS = ["zygote", "spawn"]
_HANG_TIMEOUT_S = {"zygote": 6.0, "spawn": 12.0}  # a spawned worker first spends seconds importing torch


@pytest.fixture(params=LAUNCHERS)
def launcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(_zygote.ENV_SWITCH, "1" if request.param == "zygote" else "0")
    return request.param


def _with_forward(candidate: str, body: str) -> str:
    marker = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    assert marker in candidate
    return candidate.replace(marker, marker + textwrap.indent(textwrap.dedent(body), " " * 8))


def _evaluate(reference: Path, candidate: str, launcher: str, **kwargs):
    before = _sandbox.LAUNCHES[launcher]
    result = evaluate(reference, candidate, device="cpu", trials=1, **kwargs)
    assert _sandbox.LAUNCHES[launcher] == before + 1, f"the worker was not started by {launcher}"
    return result


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def _zygote_pid() -> int | None:
    return _zygote.POOL.pid("cpu", _worker_env("cpu"))


@pytest.mark.parametrize(
    ("body", "reason"),
    [("import ctypes\nctypes.string_at(0)\n", "SIGSEGV"), ("import os\nos._exit(3)\n", "exit code 3")],
    ids=["segfault", "os_exit"],
)
def test_crash_is_contained_and_the_next_evaluation_works(softmax_reference, softmax_candidate, launcher, body,
                                                           reason):
    crashed = _evaluate(softmax_reference, _with_forward(softmax_candidate, body), launcher)
    assert crashed.status is EvalStatus.CRASHED, crashed.feedback()
    assert reason in crashed.message and "trial 1" in crashed.message
    zygote = _zygote_pid() if launcher == "zygote" else None
    again = _evaluate(softmax_reference, softmax_candidate, launcher)
    assert again.ok, again.feedback()
    if launcher == "zygote":
        assert zygote is not None and _zygote_pid() == zygote, "the zygote did not survive its job's crash"


def test_hang_is_killed_with_its_children(softmax_reference, softmax_candidate, launcher, tmp_path):
    pid_file = tmp_path / "child.pid"
    body = f"""
    import subprocess, sys
    subprocess.Popen([sys.executable, "-c", "import os, time, pathlib; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(120)"])
    while True:
        pass
    """
    limit = _HANG_TIMEOUT_S[launcher]
    start = time.perf_counter()
    result = _evaluate(softmax_reference, _with_forward(softmax_candidate, body), launcher, timeout_s=limit)
    assert result.status is EvalStatus.TIMEOUT and result.stage == "trial 1/1"
    assert time.perf_counter() - start < limit + 10
    assert pid_file.exists(), "the candidate's child never started"
    assert not _alive(int(pid_file.read_text())), "a child of the hung worker survived the timeout"
    assert _evaluate(softmax_reference, softmax_candidate, launcher).ok


def test_children_left_behind_by_a_finished_job_are_killed(softmax_reference, softmax_candidate, launcher, tmp_path):
    pid_file = tmp_path / "child.pid"
    body = f"""
    import subprocess, sys, pathlib
    if not pathlib.Path({str(pid_file)!r}).exists():
        subprocess.Popen([sys.executable, "-c", "import os, time, pathlib; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(120)"])
        time.sleep(0.0)
        while not pathlib.Path({str(pid_file)!r}).exists():
            pass
    """
    body = "import time\n" + textwrap.dedent(body)
    result = _evaluate(softmax_reference, _with_forward(softmax_candidate, body), launcher)
    assert result.status is not EvalStatus.CORRECT  # a child process left running is a rule break
    assert pid_file.exists(), "the candidate's child never started"
    deadline = time.monotonic() + 5
    while _alive(int(pid_file.read_text())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pid_file.read_text())), "a process the candidate started survived its evaluation"


def test_forked_worker_is_isolated(softmax_reference, softmax_candidate, tmp_path, monkeypatch):
    """Own session and group, no socket or pipe of the zygote, stdin closed after the key was read."""
    monkeypatch.setenv(_zygote.ENV_SWITCH, "1")
    facts = tmp_path / "facts.txt"
    body = f"""
    import os, pathlib
    fds = {{}}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            pass
    pathlib.Path({str(facts)!r}).write_text(repr((os.getpid(), os.getsid(0), os.getpgid(0), fds)))
    """
    result = _evaluate(softmax_reference, _with_forward(softmax_candidate, body), "zygote")
    assert result.status in (EvalStatus.CORRECT, EvalStatus.REJECTED), result.feedback()
    pid, sid, pgid, fds = eval(facts.read_text())  # noqa: S307  (our own repr of ints and strings)
    assert sid == pid and pgid == pid, "the worker does not lead its own session and process group"
    assert pid != _zygote_pid()
    assert not [t for t in fds.values() if t.startswith("socket:")], f"the worker holds a socket: {fds}"
    assert "0" not in fds or fds["0"] == "/dev/null", f"the key pipe is still readable: {fds}"


def test_forged_result_is_caught_through_the_zygote(softmax_reference, softmax_candidate, monkeypatch):
    monkeypatch.setenv(_zygote.ENV_SWITCH, "1")
    body = """
    import json, os
    spec = json.loads(open("spec.json").read())
    with open(spec["result_path"], "w") as f:
        json.dump({"status": "correct", "message": "correct on 5 trials"}, f)
    os._exit(0)
    """
    result = _evaluate(softmax_reference, _with_forward(softmax_candidate, body), "zygote")
    assert result.status is EvalStatus.REJECTED
    assert result.rule in ("evaluator_tampering", "evaluator_access")


def test_dead_zygote_is_replaced(softmax_reference, softmax_candidate, monkeypatch, caplog):
    monkeypatch.setenv(_zygote.ENV_SWITCH, "1")
    assert _evaluate(softmax_reference, softmax_candidate, "zygote").ok
    first = _zygote_pid()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _alive(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    with caplog.at_level(logging.WARNING, logger="tritonsmith.evaluator.sandbox._zygote"):
        again = _evaluate(softmax_reference, softmax_candidate, "zygote")
    assert again.ok, again.feedback()
    assert _zygote_pid() not in (None, first)
    assert "died" in caplog.text
    assert again.stage_seconds.get("zygote_start", 0) > 0
    stages = {k: v for k, v in again.stage_seconds.items() if "/" not in k}  # parts (trial/compare) lie inside
    assert abs(sum(stages.values()) - again.wall_s) < 0.05


def test_unsafe_zygote_is_not_used(softmax_reference, softmax_candidate, tmp_path, monkeypatch, caplog):
    """A zygote whose imports leave a thread running is never forked from: the job is spawned."""
    (tmp_path / "_starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(_zygote.ENV_PRELOAD, "_starts_a_thread")
    monkeypatch.setenv(_zygote.ENV_SWITCH, "1")
    with caplog.at_level(logging.WARNING):
        result = _evaluate(softmax_reference, softmax_candidate, "spawn")
    assert result.ok, result.feedback()
    assert "unsafe to fork" in caplog.text and "Python threads" in caplog.text
    assert "spawning" in caplog.text


def test_zygote_exits_when_its_caller_dies(softmax_reference, softmax_candidate, tmp_path):
    script = textwrap.dedent(f"""
        import os, sys
        from tritonsmith.evaluator.sandbox import _zygote
        from tritonsmith.evaluator._evaluate import _worker_env, evaluate
        result = evaluate({str(softmax_reference)!r}, {softmax_candidate!r}, device="cpu", trials=1)
        assert result.ok, result.feedback()
        print(_zygote.POOL.pid("cpu", _worker_env("cpu")), flush=True)
        os._exit(0)  # no atexit clean-up: the zygote must notice on its own
    """)
    env = {**os.environ, _zygote.ENV_SWITCH: "1"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the zygote outlived its caller"


def test_opt_out_spawns_and_starts_no_zygote(softmax_reference, softmax_candidate, monkeypatch):
    monkeypatch.setenv(_zygote.ENV_SWITCH, "0")
    assert not _zygote.enabled()
    _zygote.POOL.close()
    result = _evaluate(softmax_reference, softmax_candidate, "spawn")
    assert result.ok and "zygote_start" not in result.stage_seconds
    assert _zygote_pid() is None


def test_prestarted_zygote_serves_the_first_evaluation(softmax_reference, softmax_candidate, monkeypatch):
    from tritonsmith.evaluator._evaluate import prestart_worker

    monkeypatch.setenv(_zygote.ENV_SWITCH, "1")
    _zygote.POOL.close()
    prestart_worker("cpu")
    pid = _zygote_pid()
    assert pid is not None, "prestart_worker started no zygote"
    result = _evaluate(softmax_reference, softmax_candidate, "zygote")
    assert result.ok, result.feedback()
    assert _zygote_pid() == pid


def test_profiling_module_runs_in_a_worker_on_both_paths(softmax_reference, launcher, tmp_path):
    """The profiler's worker is launched like an evaluation worker (forked when a zygote serves the device).

    On this CPU machine its ``main`` fails at its first CUDA call: that failure, in the log, proves which
    module ran; the caller only sees a return code and the log tail.
    """
    result_path = tmp_path / "gpu.json"
    spec = tmp_path / "torch_profile_spec.json"
    spec.write_text(json.dumps({"problem_path": str(softmax_reference), "problem_name": "softmax_reference",
                                "candidate_path": None, "weights_path": None, "dtype": None, "seed": 0,
                                "compiled": False, "result_path": str(result_path),
                                "stage_path": str(tmp_path / "stage.txt")}))
    before = dict(_sandbox.LAUNCHES)
    run = _sandbox.run_module("tritonsmith.profiler._torch_profile", spec, tmp_path, timeout_s=60,
                              env=_worker_env("cpu"), device="cpu")
    assert run.launcher == launcher and _sandbox.LAUNCHES[launcher] == before.get(launcher, 0) + 1
    assert not run.timed_out and run.returncode not in (0, None)
    assert "_torch_profile.py" in run.output_tail and not result_path.exists()


def test_only_known_worker_modules_run(tmp_path):
    with pytest.raises(ValueError, match="runs only"):
        _sandbox.run_module("os", tmp_path / "spec.json", tmp_path, timeout_s=5, env=_worker_env("cpu"), device="cpu")
    zygote, _ = _zygote.POOL.get("cpu", _worker_env("cpu"))
    with pytest.raises(ValueError, match="runs only"):
        zygote.launch(tmp_path / "spec.json", tmp_path, 2, 5.0, module="tritonsmith.cli")
