"""The suite worker's stop: a second SIGTERM ends the process at once, even during interpreter shutdown."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

_CHILD = """
import signal, threading, time
from tritonsmith.suite import _worker
signal.signal(signal.SIGTERM, _worker._exit_on_term)
_worker._TERMINATED.set()  # the first SIGTERM came: the task in hand was answered
threading.Thread(target=time.sleep, args=(60,)).start()  # as LangGraph's threads: shutdown joins them
print("ready", flush=True)
"""


def test_a_second_sigterm_during_shutdown_exits_at_once_without_an_ignored_exception() -> None:
    """H100 2026-12-06: raised in the handler, SystemExit landed in the shutdown's thread join, was printed as
    "Exception ignored" and the worker went on waiting for its threads."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # the main module has ended: the interpreter waits for the thread
    start = time.monotonic()
    child.send_signal(signal.SIGTERM)
    try:
        _, err = child.communicate(timeout=20)
    finally:
        child.kill()
    assert child.returncode == 128 + signal.SIGTERM and time.monotonic() - start < 15
    assert "Exception ignored" not in err and "SystemExit" not in err
