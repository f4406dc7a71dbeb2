"""Where suite work runs: one worker process per visible GPU, or per CPU core on a machine without one.

Each GPU worker sees exactly one GPU (``CUDA_VISIBLE_DEVICES`` is set before the process starts) and
does one thing at a time, so a timing never shares its GPU with other work. With ``slots_per_gpu > 1``
several workers share a GPU and take a per-GPU file lock around every evaluation: their generators
(CPU work: lowering, LLM calls) run while another slot's candidate holds the GPU. Triton compiles
inside the evaluator's sandbox, so compilation is under the lock too (the evaluator has no separate
compile step to hoist out of it).
"""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tritonsmith.suite.results import ERROR, STOPPED, ProblemRecord

__all__ = [
    "GPU_LOCK_ENV",
    "LocalPool",
    "SuitePool",
    "WorkerSlot",
    "gpu_exclusive",
    "install_gpu_lock",
    "plan_slots",
    "visible_gpus",
]

log = logging.getLogger(__name__)

GPU_LOCK_ENV = "TRITONSMITH_GPU_LOCK"
_TERM_GRACE_S = 5.0


@dataclass(frozen=True, kw_only=True)
class WorkerSlot:
    """One worker: its name in reports, the environment it starts with, and its GPU (None on the CPU)."""

    name: str
    env: Mapping[str, str] = field(default_factory=dict)
    gpu: str | None = None


class SuitePool(Protocol):
    """Runs tasks, reporting each start and each finished record to the caller's thread."""

    def run(self, tasks: Sequence[Any], *, on_start: Callable[[Any, str], None],
            on_done: Callable[[ProblemRecord], None], may_start: Callable[[], bool] = ...) -> None: ...


def visible_gpus(env: Mapping[str, str] | None = None, device_count: int | None = None) -> list[str]:
    """GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set (ids or UUIDs), else 0..count-1."""
    env = os.environ if env is None else env
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is not None:
        ids: list[str] = []
        for part in (p.strip() for p in spec.split(",")):
            if not part or part.startswith("-"):  # CUDA stops at the first invalid entry
                break
            ids.append(part)
        return ids
    if device_count is None:
        import torch

        device_count = torch.cuda.device_count()
    return [str(i) for i in range(device_count)]


def plan_slots(device: str, *, workers: int | None = None, slots_per_gpu: int = 1, gpus: Sequence[str] | None = None,
               cpu_count: int | None = None, lock_dir: str | Path | None = None) -> list[WorkerSlot]:
    """The workers for ``device`` (``"cuda"`` or ``"cpu"``).

    On CUDA: ``workers`` GPUs (default all visible), ``slots_per_gpu`` workers each. On the CPU:
    ``workers`` interpreter workers (default one per core) sharing the cores' threads.
    """
    cores = cpu_count or available_cores()
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if slots_per_gpu < 1:
        raise ValueError(f"slots_per_gpu must be at least 1, got {slots_per_gpu}")
    if device == "cpu":
        n = workers or cores
        threads = str(max(1, cores // n))
        return [WorkerSlot(name=f"cpu{i}", env={"CUDA_VISIBLE_DEVICES": "", **_threads_env(threads)}) for i in range(n)]
    if device != "cuda":
        raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
    ids = list(visible_gpus() if gpus is None else gpus)
    if not ids:
        raise ValueError("device='cuda' but no GPU is visible (check CUDA_VISIBLE_DEVICES)")
    if workers is not None and workers > len(ids):
        log.warning("%d workers asked for but %d GPUs visible: using %d", workers, len(ids), len(ids))
    ids = ids[: workers or len(ids)]
    threads = str(max(1, cores // (len(ids) * slots_per_gpu)))
    slots = []
    for gpu in ids:
        for j in range(slots_per_gpu):
            env = {"CUDA_VISIBLE_DEVICES": gpu, **_threads_env(threads)}
            if slots_per_gpu > 1:
                lock = Path(lock_dir or ".") / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', gpu)}.lock"
                env[GPU_LOCK_ENV] = str(lock.resolve())
            slots.append(WorkerSlot(name=f"gpu{gpu}" + (f".{j}" if slots_per_gpu > 1 else ""), env=env, gpu=gpu))
    return slots


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's total)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _threads_env(threads: str) -> dict[str, str]:
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


_lock_state = threading.local()


@contextmanager
def gpu_exclusive() -> Iterator[None]:
    """Hold this worker's GPU alone (re-entrant; a no-op when the GPU is not shared)."""
    path = os.environ.get(GPU_LOCK_ENV)
    depth = getattr(_lock_state, "depth", 0)
    if not path or depth:
        _lock_state.depth = depth + 1
        try:
            yield
        finally:
            _lock_state.depth = depth
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _lock_state.depth = 1
        try:
            yield
        finally:
            _lock_state.depth = 0
            fcntl.flock(handle, fcntl.LOCK_UN)


def install_gpu_lock() -> bool:
    """In a worker that shares its GPU, make every evaluation and profile hold the GPU lock. Idempotent.

    Wraps ``evaluate`` and ``profile_kernel`` on their modules (``tritonsmith.evaluator._evaluate``,
    ``tritonsmith.profiler.profile``); the optimize loop looks both up there at call time.
    """
    if not os.environ.get(GPU_LOCK_ENV):
        return False
    import importlib

    targets = (("tritonsmith.evaluator._evaluate", "evaluate"), ("tritonsmith.profiler.profile", "profile_kernel"))
    for module_name, attr in targets:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        original = getattr(module, attr, None)
        if original is None or getattr(original, "_gpu_locked", False):
            continue
        setattr(module, attr, _locked(original))
    return True


def _locked(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with gpu_exclusive():
            return fn(*args, **kwargs)

    locked._gpu_locked = True  # type: ignore[attr-defined]
    return locked


class LocalPool:
    """Worker processes on this machine, one per slot, fed by one thread each."""

    def __init__(self, slots: Sequence[WorkerSlot], *, log_dir: str | Path, python: str = sys.executable) -> None:
        if not slots:
            raise ValueError("a pool needs at least one worker slot")
        self.slots = list(slots)
        self.log_dir = Path(log_dir)
        self.python = python
        self._stop = threading.Event()
        self._procs: dict[str, subprocess.Popen[str]] = {}
        self._procs_lock = threading.Lock()

    def run(self, tasks: Sequence[Any], *, on_start: Callable[[Any, str], None],
            on_done: Callable[[ProblemRecord], None], may_start: Callable[[], bool] = lambda: True) -> None:
        """Run ``tasks`` until done (or until ``may_start`` says stop starting new ones); callbacks run here."""
        pending = deque(tasks)
        take = threading.Lock()
        events: queue.Queue[tuple[str, Any]] = queue.Queue()

        def next_task() -> Any:
            with take:
                return pending.popleft() if pending and not self._stop.is_set() and may_start() else None

        self.log_dir.mkdir(parents=True, exist_ok=True)
        threads = [threading.Thread(target=self._serve, args=(slot, next_task, events), name=f"suite-{slot.name}",
                                    daemon=True) for slot in self.slots]
        for thread in threads:
            thread.start()
        live = [len(threads)]
        try:
            while live[0]:
                _handle(events.get(), live, on_start, on_done)
        except KeyboardInterrupt:  # Ctrl-C: the workers answer with what finished of their problems, then exit
            self.shutdown()
            _drain(events, live, on_done)
            raise
        except BaseException:
            self.shutdown()
            raise
        for thread in threads:
            thread.join()

    def shutdown(self) -> None:
        """Stop starting tasks and end every worker (SIGTERM first: their evaluations clean up)."""
        self._stop.set()
        with self._procs_lock:
            procs = list(self._procs.values())
        _terminate_all(procs)

    def _serve(self, slot: WorkerSlot, next_task: Callable[[], Any], events: queue.Queue[tuple[str, Any]]) -> None:
        proc: subprocess.Popen[str] | None = None
        try:
            while (task := next_task()) is not None:
                if proc is None:
                    proc = self._spawn(slot)
                events.put(("start", (task, slot.name)))
                start = time.perf_counter()
                record = _roundtrip(proc, task)
                if record is None:
                    record = self._dead_worker_record(task, proc, slot)
                    _terminate(proc)
                    proc = None
                handled = threading.Event()  # take the next task only once the caller has seen this record
                events.put(("done", (record.with_timing(wall_s=time.perf_counter() - start, worker=slot.name),
                                     handled)))
                while not handled.wait(0.5) and not self._stop.is_set():
                    pass
        except BaseException as exc:  # a bug in the pool itself: hand it to the caller's thread
            events.put(("failed", exc))
        finally:
            if proc is not None:
                _close(proc)
            events.put(("exit", slot.name))

    def _spawn(self, slot: WorkerSlot) -> subprocess.Popen[str]:
        log_path = self.log_dir / f"worker-{slot.name}.log"
        with open(log_path, "a") as log_file:
            proc = subprocess.Popen([self.python, "-m", "tritonsmith.suite._worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log_file, env={**os.environ, **slot.env},
                                    text=True, bufsize=1, start_new_session=True)
        with self._procs_lock:
            self._procs[slot.name] = proc
        log.info("started worker %s (pid %d, %s)", slot.name, proc.pid,
                 ", ".join(f"{k}={v}" for k, v in slot.env.items()))
        return proc

    def _dead_worker_record(self, task: Any, proc: subprocess.Popen[str], slot: WorkerSlot) -> ProblemRecord:
        try:
            proc.wait(timeout=_TERM_GRACE_S)  # its stdout closed: it is exiting, collect the code
        except subprocess.TimeoutExpired:
            pass
        tail = _tail(self.log_dir / f"worker-{slot.name}.log")
        return ProblemRecord(key=task.key, problem=Path(task.problem_path).stem, level=task.level, status=ERROR,
                             message=f"worker {slot.name} died (exit code {proc.returncode}) during this problem",
                             error=tail, mode=task.mode, device=task.device)


def _handle(event: tuple[str, Any], live: list[int], on_start: Callable[[Any, str], None],
            on_done: Callable[[ProblemRecord], None]) -> None:
    """One event of the slots' threads, in the caller's thread (``live[0]``: threads still running)."""
    kind, payload = event
    if kind == "start":
        on_start(*payload)
    elif kind == "done":
        record, handled = payload
        try:
            on_done(record)
        finally:
            handled.set()
    elif kind == "failed":
        raise payload
    else:
        live[0] -= 1


def _drain(events: queue.Queue[tuple[str, Any]], live: list[int], on_done: Callable[[ProblemRecord], None]) -> None:
    """After Ctrl-C: record what the stopped workers answer (their problems' finished attempts) until every
    slot's thread ended; a problem stopped before any attempt finished leaves no record."""
    deadline = time.monotonic() + 4 * _TERM_GRACE_S
    while live[0] and time.monotonic() < deadline:
        try:
            event = events.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            return
        kind, payload = event
        if kind == "done" and payload[0].status in (ERROR, STOPPED) and not payload[0].attempts:
            payload[1].set()  # stopped before anything finished: not a result, the rerun starts it afresh
        elif kind != "start":
            _handle(event, live, lambda *a: None, on_done)


def _roundtrip(proc: subprocess.Popen[str], task: Any) -> ProblemRecord | None:
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(task.to_dict()) + "\n")
        proc.stdin.flush()
    except (BrokenPipeError, OSError):
        return None
    line = proc.stdout.readline()
    if not line:
        return None
    return ProblemRecord.from_dict(json.loads(line))


def _close(proc: subprocess.Popen[str]) -> None:
    try:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=_TERM_GRACE_S)
    except (subprocess.TimeoutExpired, OSError):
        _terminate(proc)


def _terminate(proc: subprocess.Popen[str]) -> None:
    _terminate_all([proc])


def _terminate_all(procs: Sequence[subprocess.Popen[str]]) -> None:
    """SIGTERM every worker at once, then wait for them together: one grace period in all, not one each (a
    stopped worker answers with its finished attempts first, and the caller's own deadline, such as a GPU
    visit's time limit, comes soon after its hard stop). What is left after it gets SIGKILL."""
    live = [p for p in procs if p.poll() is None]
    for proc in live:
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + _TERM_GRACE_S
    for proc in live:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()


def _tail(path: Path, limit: int = 3000) -> str | None:
    try:
        return path.read_text(errors="replace")[-limit:] or None
    except FileNotFoundError:
        return None
