"""Run one evaluation job in a fresh worker process that cannot take the caller down.

The worker gets its own process session, so a wall-clock timeout (or the end of the job) kills its
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class WorkerOutcome:
    result: dict[str, Any] | None
    returncode: int | None
    timed_out: bool
    stage: str | None
    output_tail: str
    wall_s: float
    forged: bool = False


def run_worker(spec: dict[str, Any], workdir: Path, *, timeout_s: float, env: dict[str, str]) -> WorkerOutcome:
    """Run ``tritonsmith.tools._worker`` on ``spec`` and collect what it reported."""
    spec_path = workdir / "spec.json"
    spec = {**spec, "result_path": str(workdir / "result.json"), "stage_path": str(workdir / "stage.txt")}
    spec_path.write_text(json.dumps(spec))
    log_path = workdir / "worker.log"
    key = secrets.token_hex(32).encode()
    start = time.perf_counter()
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tritonsmith.tools._worker", str(spec_path)],
            stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
            env=env, cwd=workdir, start_new_session=True,
        )
        timed_out = False
        try:
            _send_key(proc, key)
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            log.warning("worker exceeded %.0f s; killing its process group", timeout_s)
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            _kill_group(proc)
    result_path = Path(spec["result_path"])
    result, forged = _read_result(result_path, key) if not timed_out else (None, False)
    stage_path = Path(spec["stage_path"])
    stage = stage_path.read_text().strip() if stage_path.exists() else None
    return WorkerOutcome(result=result, returncode=proc.returncode, timed_out=timed_out, stage=stage,
                         output_tail=_tail(log_path), wall_s=time.perf_counter() - start, forged=forged)


def _send_key(proc: subprocess.Popen[bytes], key: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(key + b"\n")
        proc.stdin.close()
    except BrokenPipeError:  # the worker died at start-up; its exit status tells the rest
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


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker's whole process group, including anything the candidate left running."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    return data[-limit:].decode(errors="replace")
