"""Run one evaluation job (or profiling job) in a fresh worker process that cannot take the caller down.

The worker is forked by a zygote that has already imported torch and triton (see ``_zygote``; off with
``TRITONSMITH_EVAL_ZYGOTE=0``) or, when none is usable, spawned as ``python -m tritonsmith.evaluator.sandbox._worker``.
Either way the worker gets its own process session, so a wall-clock timeout (or the end of the job) kills its
whole process group: children the candidate spawned die with it. Results come back through a JSON
file written atomically by the worker; a worker that dies first leaves its last stage behind.

The candidate runs inside the worker and could write that file itself. The worker therefore signs
its result with a key it read from stdin (never a file, argument or environment variable) before the
candidate was imported; a result without a valid signature is reported as forged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from tritonsmith.evaluator.sandbox import _zygote

log = logging.getLogger(__name__)

# How the workers of this process were started ("zygote", "spawn"): the benchmarks record it.
LAUNCHES: Counter[str] = Counter()


class _Worker(Protocol):
    pid: int
    returncode: int | None

    def wait(self, timeout: float | None = None) -> int | None: ...

    def kill_group(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class WorkerOutcome:
    result: dict[str, Any] | None
    returncode: int | None
    timed_out: bool
    stage: str | None
    output_tail: str
    wall_s: float
    forged: bool = False
    launcher: str = "spawn"  # "zygote" (forked) or "spawn" (a fresh interpreter)
    startup_s: float = 0.0  # waiting for the zygote to start (its imports), inside wall_s


def run_worker(spec: dict[str, Any], workdir: Path, *, timeout_s: float, env: dict[str, str]) -> WorkerOutcome:
    """Run ``tritonsmith.evaluator.sandbox._worker`` on ``spec`` and collect what it reported."""
    spec_path = workdir / "spec.json"
    spec = {**spec, "result_path": str(workdir / "result.json"), "stage_path": str(workdir / "stage.txt")}
    spec_path.write_text(json.dumps(spec))
    log_path = workdir / "worker.log"
    key = secrets.token_hex(32).encode()
    start = time.perf_counter()
    with open(log_path, "wb") as log_file:
        proc, key_pipe, launcher, startup_s = _launch(spec_path, workdir, log_file, env, spec["device"], timeout_s)
        timed_out = False
        try:
            _send_key(key_pipe, key)
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            log.warning("worker exceeded %.0f s; killing its process group", timeout_s)
        except BaseException:
            proc.kill_group()
            raise
        finally:
            proc.kill_group()
    LAUNCHES[launcher] += 1
    result_path = Path(spec["result_path"])
    result, forged = _read_result(result_path, key) if not timed_out else (None, False)
    stage_path = Path(spec["stage_path"])
    stage = stage_path.read_text().strip() if stage_path.exists() else None
    return WorkerOutcome(result=result, returncode=proc.returncode, timed_out=timed_out, stage=stage,
                         output_tail=_tail(log_path), wall_s=time.perf_counter() - start, forged=forged,
                         launcher=launcher, startup_s=startup_s)


@dataclass(frozen=True, kw_only=True)
class ModuleOutcome:
    returncode: int | None
    timed_out: bool
    output_tail: str
    wall_s: float
    launcher: str
    zygote_wait_s: float = 0.0  # of wall_s: waiting for the zygote to finish starting (0 when it was ready)


def run_module(module: str, spec_path: Path, workdir: Path, *, timeout_s: float, env: dict[str, str],
               device: str) -> ModuleOutcome:
    """Run ``module``'s ``main`` on ``spec_path`` like an evaluation worker: forked from the zygote when one
    serves ``device`` and ``env`` (no interpreter start-up), else spawned; its own session, its whole
    group killed at ``timeout_s``. The module writes its own result file; nothing is signed (the profiler
    describes a candidate, it does not judge one). Output goes to ``spec_path`` with suffix ``.log``.
    """
    if module not in _zygote.WORKER_MODULES:
        raise ValueError(f"run_module runs only {', '.join(_zygote.WORKER_MODULES)}, not {module!r}")
    log_path = spec_path.with_suffix(".log")
    start = time.perf_counter()
    with open(log_path, "wb") as log_file:
        proc, stdin, launcher, waited = _launch(spec_path, workdir, log_file, env, device, timeout_s, module=module)
        timed_out = False
        try:
            stdin.close()  # no key: EOF on the worker's stdin
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            log.warning("%s exceeded %.0f s; killing its process group", module, timeout_s)
        finally:
            proc.kill_group()
    LAUNCHES[launcher] += 1
    return ModuleOutcome(returncode=proc.returncode, timed_out=timed_out, output_tail=_tail(log_path),
                         wall_s=time.perf_counter() - start, launcher=launcher, zygote_wait_s=waited)


def prestart(device: str, env: dict[str, str]) -> None:
    """Start the zygote for ``device`` in the background so that the first evaluation finds it ready."""
    if _zygote.enabled():
        _zygote.POOL.prestart(device, env)


def _launch(spec_path: Path, workdir: Path, log_file: IO[bytes], env: dict[str, str], device: str,
            timeout_s: float, module: str = _zygote.WORKER_MODULES[0]) -> tuple[_Worker, IO[bytes], str, float]:
    """(worker, its stdin for the key, launcher, seconds waited for the zygote): forked if possible, else spawned."""
    if _zygote.enabled():
        try:
            zygote, waited = _zygote.POOL.get(device, env)
            worker, key_fd = zygote.launch(spec_path, workdir, log_file.fileno(), timeout_s, module=module)
            return worker, os.fdopen(key_fd, "wb"), "zygote", waited
        except _zygote.ZygoteUnavailable as exc:
            log.warning("%s; spawning a fresh worker instead", exc)
    proc = subprocess.Popen(
        [sys.executable, "-m", module, str(spec_path)],
        stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
        env=env, cwd=workdir, start_new_session=True,
    )
    assert proc.stdin is not None
    return _Spawned(proc), proc.stdin, "spawn", 0.0


class _Spawned:
    """A spawned worker behind the same interface as a forked one."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout=timeout)

    def kill_group(self) -> None:
        """Kill the worker's whole process group, including anything the candidate left running."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


def _send_key(pipe: IO[bytes], key: bytes) -> None:
    try:
        pipe.write(key + b"\n")
        pipe.close()
    except BrokenPipeError:  # the worker died at start-up; its exit status tells the rest
        try:
            pipe.close()
        except BrokenPipeError:
            pass


def _read_result(path: Path, key: bytes) -> tuple[dict[str, Any] | None, bool]:
    """The worker's result if its signature checks out; ``(None, True)`` for a forged or unreadable one."""
    if not path.exists():
        return None, False
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, True
    if not isinstance(data, dict):
        return None, True
    signature = data.pop("signature", None)
    expected = hmac.new(key, json.dumps(data, sort_keys=True).encode(), hashlib.sha256).hexdigest()
    if not isinstance(signature, str) or not hmac.compare_digest(signature, expected):
        log.warning("the worker's result file carries no valid signature: treating it as forged")
        return None, True
    return data, False


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    return data[-limit:].decode(errors="replace")
