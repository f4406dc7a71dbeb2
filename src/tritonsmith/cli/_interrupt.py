"""Ctrl-C: the first one stops the run at once and keeps what finished; a second one leaves without cleanup.

The evaluator's workers run in sessions of their own (a candidate must not take the caller down), so the
terminal's SIGINT never reaches them, and the optimize loop waits for them in a LangGraph thread that a
KeyboardInterrupt does not reach either. The handler therefore kills every running worker's process group
itself, and refuses new ones (an evaluation about to start after a generation or the zygote's start-up),
before raising KeyboardInterrupt in the main thread.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from tritonsmith.evaluator.sandbox import allow_workers, kill_running_workers  # never import in a handler

__all__ = ["INTERRUPTED_EXIT", "exit_now", "interruptible"]

INTERRUPTED_EXIT = 130  # 128 + SIGINT, as shells report a Ctrl-C
_INTERRUPTED = threading.Event()


def _second(signum: int, frame: FrameType | None) -> None:
    kill_running_workers(stop=True)
    os._exit(INTERRUPTED_EXIT)


def _first(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, _second)
    _INTERRUPTED.set()
    kill_running_workers(stop=True)
    raise KeyboardInterrupt


def exit_now(code: int) -> None:
    """Leave without waiting for threads LangGraph left running after a Ctrl-C (a model call, a node about
    to be refused its evaluator worker): interpreter exit would join them. Output is flushed first; any
    worker that started meanwhile is killed."""
    kill_running_workers(stop=True)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside: SIGINT kills the running evaluator workers and raises KeyboardInterrupt (the caller keeps what
    finished); during that cleanup a second SIGINT exits with 130 at once. Installed even where SIGINT was
    inherited as ignored (a script's background job), so that ``kill -INT`` stops a run as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if not _INTERRUPTED.is_set():  # after a Ctrl-C the process ends: no worker may start on the way out
            allow_workers()
