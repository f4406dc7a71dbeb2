"""A suite worker process: reads tasks (JSON lines) on stdin, answers records (JSON lines) on its own pipe.

The coordinator starts one per slot with the slot's environment (``CUDA_VISIBLE_DEVICES`` naming one
GPU, thread counts, the GPU lock). Anything the optimize loop or a library prints goes to stderr (the
worker's log), never into the protocol.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import sys
import threading
from typing import NoReturn

from tritonsmith.suite._task import SuiteTask, execute_task
from tritonsmith.suite.pool import install_gpu_lock
from tritonsmith.evaluator.sandbox import kill_running_workers

_PR_SET_PDEATHSIG = 1
_TERMINATED = threading.Event()  # SIGTERM came: answer the task in hand with what finished, then exit


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints (even from C code) go to the log, not into the protocol
    _die_with_parent()
    signal.signal(signal.SIGTERM, _exit_on_term)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    install_gpu_lock()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            record = execute_task(SuiteTask.from_dict(json.loads(line)))
            protocol.write(json.dumps(record.to_dict(), separators=(",", ":")) + "\n")
            if _TERMINATED.is_set():
                break
    except KeyboardInterrupt:  # stopped between tasks or outside the optimize loop: nothing finished to keep
        pass
    if _TERMINATED.is_set():
        raise SystemExit(128 + signal.SIGTERM)


def _exit_on_term(signum: int, frame: object) -> NoReturn:
    """The coordinator's stop (its hard stop, Ctrl-C): end the problem in hand with its finished attempts.

    The evaluation may wait in another thread (LangGraph runs nodes there) that an exception never reaches:
    the sandboxed workers are killed first. Then KeyboardInterrupt ends the optimize loop, which keeps its
    finished attempts (``OptimizeInterrupted``); ``execute_task`` records them and the worker exits after
    answering. A second SIGTERM exits at once.
    """
    kill_running_workers(stop=True)
    if _TERMINATED.is_set():
        # at once: raised here, SystemExit may land in the interpreter's shutdown (joining LangGraph's
        # threads), which prints it as "Exception ignored" and goes on waiting
        sys.stderr.flush()
        os._exit(128 + signum)
    _TERMINATED.set()
    raise KeyboardInterrupt


def _die_with_parent() -> None:
    """Ask Linux to send SIGTERM when the coordinator dies, even by SIGKILL (no orphaned GPU work)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before prctl took effect
        raise SystemExit(1)


if __name__ == "__main__":
    main()
