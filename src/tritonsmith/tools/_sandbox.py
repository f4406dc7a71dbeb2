"""Run one evaluation job in a fresh worker process that cannot take the caller down.

The worker gets its own process session, so a wall-clock timeout (or the end of the job) kills its
whole process group: children the candidate spawned die with it. Results come back through a JSON
file written atomically by the worker; a worker that dies first leaves its last stage behind.
"""

from __future__ import annotations

import json
import logging
import os
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


def run_worker(spec: dict[str, Any], workdir: Path, *, timeout_s: float, env: dict[str, str]) -> WorkerOutcome:
    """Run ``tritonsmith.tools._worker`` on ``spec`` and collect what it reported."""
    spec_path = workdir / "spec.json"
    spec = {**spec, "result_path": str(workdir / "result.json"), "stage_path": str(workdir / "stage.txt")}
    spec_path.write_text(json.dumps(spec))
    log_path = workdir / "worker.log"
    start = time.perf_counter()
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tritonsmith.tools._worker", str(spec_path)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            env=env, cwd=workdir, start_new_session=True,
        )
        timed_out = False
        try:
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
    result = json.loads(result_path.read_text()) if result_path.exists() and not timed_out else None
    stage_path = Path(spec["stage_path"])
    stage = stage_path.read_text().strip() if stage_path.exists() else None
    return WorkerOutcome(result=result, returncode=proc.returncode, timed_out=timed_out, stage=stage,
                         output_tail=_tail(log_path), wall_s=time.perf_counter() - start)


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
