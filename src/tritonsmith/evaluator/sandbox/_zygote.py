"""A fork server ("zygote") for evaluation workers: import torch and triton once, fork one worker per job.

A fresh worker spends seconds importing torch, triton and (for the ``torch.compile`` baseline)
``torch._dynamo``/``torch._inductor`` before it evaluates anything. The zygote is a long-lived process,
one per device kind and environment, that has done those imports once and forks a worker for each job.

It never initializes CUDA (a fork after CUDA initialization is broken): the CUDA zygote checks this
after its imports and, before it accepts jobs, forks a probe that initializes CUDA and runs one
operation. A zygote that fails either check is not used: the evaluator tries one with fewer imports,
then falls back to spawning a fresh worker, and says so in its log.

Per job, the caller sends the zygote one message with three file descriptors: the read end of a pipe
the caller writes the result key into (the worker's stdin, exactly as for a spawned worker: the key
never passes through the zygote), the worker's log file (stdout and stderr), and the write end of a
status pipe. The zygote forks a *supervisor*, which forks the worker and reports ``pid N`` and later
``exit RC`` (RC as ``subprocess`` gives it: negative for a signal) on the status pipe. The worker gets
its own session, so the caller's timeout kills its whole process group as for a spawned worker; the
supervisor also kills the group when the worker ends (anything it left behind) and enforces the time
limit itself if the caller is gone. A crash, hang or ``os._exit`` in a job cannot reach the zygote.

Opt out with ``TRITONSMITH_EVAL_ZYGOTE=0``. Linux only (fd passing, ``pidfd``); elsewhere workers are spawned.
A zygote runs the evaluator code it imported at start: code edited later is used by new processes only.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

log = logging.getLogger(__name__)

ENV_SWITCH = "TRITONSMITH_EVAL_ZYGOTE"
ENV_PRELOAD = "TRITONSMITH_EVAL_ZYGOTE_PRELOAD"  # extra modules (comma-separated) every zygote imports
_READY_TIMEOUT_S = 180.0
_SUPERVISOR_GRACE_S = 10.0  # the caller kills at its own limit; the supervisor only if the caller is gone
_MAX_FAILURES = 3

# What each tier imports before it forks. ``base``: the worker's own imports. ``full`` (CUDA): also what
# the torch.compile baseline needs (dynamo, inductor and its Triton code generation).
_BASE_MODULES = (
    "torch", "torch.nn.functional", "numpy", "triton", "triton.language",
    "tritonsmith.evaluator.sandbox._worker", "tritonsmith.evaluator._trials", "tritonsmith.evaluator._guards",
    "tritonsmith.evaluator._compare", "tritonsmith.evaluator._errors", "tritonsmith.core.problem_meta",
    "tritonsmith.core.modload",
)
_CPU_MODULES = ("triton.runtime.interpreter",)
_COMPILE_MODULES = (
    "tritonsmith.evaluator._bench", "torch._dynamo", "torch._inductor.compile_fx", "torch._dynamo.backends.inductor",
    "torch._functorch.aot_autograd", "torch._inductor.lowering", "torch._inductor.decomposition",
    "torch._inductor.graph", "torch._inductor.scheduler", "torch._inductor.codecache", "torch._inductor.async_compile",
    "torch._inductor.codegen.triton", "torch._inductor.codegen.simd", "torch._inductor.codegen.wrapper",
    "torch._inductor.codegen.cuda_combined_scheduling", "torch._inductor.runtime.triton_heuristics",
    "torch._inductor.select_algorithm", "torch._inductor.kernel.mm", "torch._inductor.fx_passes.post_grad",
    "torch._inductor.fx_passes.joint_graph", "torch.export._trace", "torch.utils.cpp_extension",
    "tritonsmith.profiler._torch_profile",
)
TIERS = {"cpu": ("base",), "cuda": ("full", "base")}
# The modules a forked worker may run (their ``main(argv)``): the evaluator's worker and the profiler's.
WORKER_MODULES = ("tritonsmith.evaluator.sandbox._worker", "tritonsmith.profiler._torch_profile")


def enabled() -> bool:
    """The zygote is on by default where it can work (Linux); ``TRITONSMITH_EVAL_ZYGOTE=0`` turns it off."""
    flag = os.environ.get(ENV_SWITCH, "1").strip().lower()
    if flag in ("0", "false", "no", "off"):
        return False
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds") and hasattr(os, "pidfd_open")


def preload_modules(device: str, tier: str) -> tuple[str, ...]:
    """What a zygote imports: the worker's modules, the compile baseline's (CUDA ``full``), and any extra."""
    extra = tuple(m.strip() for m in os.environ.get(ENV_PRELOAD, "").split(",") if m.strip())
    if device == "cpu":
        return _BASE_MODULES + _CPU_MODULES + extra
    return _BASE_MODULES + (_COMPILE_MODULES if tier == "full" else ()) + extra


# -- caller side ----------------------------------------------------------------------------------------

class ZygoteUnavailable(RuntimeError):
    """The zygote could not take the job (not started, unsafe, or died before forking): spawn instead."""

    def __init__(self, message: str, *, unsafe: bool = False) -> None:
        super().__init__(message)
        self.unsafe = unsafe


@dataclass
class ForkedWorker:
    """A worker forked by a zygote, seen from the caller: its pid, its exit code, a group kill."""

    pid: int
    status_fd: int
    returncode: int | None = None
    done: bool = False
    _buffer: bytes = b""

    def wait(self, timeout: float | None = None) -> int | None:
        """The worker's exit code (negative: killed by that signal; None: lost); raises ``TimeoutExpired``."""
        if self.done:
            return self.returncode
        line = _read_line(self, timeout)
        if line is None:  # the supervisor vanished (killed from outside): the exit code is lost
            log.warning("the supervisor of worker %d vanished; killing the worker's group", self.pid)
            _kill(self.pid, group=True)
        elif line.startswith("exit "):
            self.returncode = int(line.split()[1])
        else:
            log.warning("unexpected message from the supervisor of worker %d: %r", self.pid, line)
            _kill(self.pid, group=True)
        self._finish()
        return self.returncode

    def kill_group(self) -> None:
        """SIGKILL the worker's process group (it leads it: setsid), then collect its exit code."""
        if self.done:
            return
        _kill(self.pid, group=True)
        try:
            self.wait(timeout=_SUPERVISOR_GRACE_S)
        except subprocess.TimeoutExpired:
            log.warning("the supervisor of worker %d did not report its exit", self.pid)
            self._finish()

    def _finish(self) -> None:
        self.done = True
        os.close(self.status_fd)


def _read_line(worker: ForkedWorker, timeout: float | None) -> str | None:
    deadline = None if timeout is None else time.monotonic() + timeout
    while b"\n" not in worker._buffer:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([worker.status_fd], [], [], left)
        if not ready:
            raise subprocess.TimeoutExpired(f"worker {worker.pid}", timeout or 0.0)
        chunk = os.read(worker.status_fd, 4096)
        if not chunk:
            return None
        worker._buffer += chunk
    line, worker._buffer = worker._buffer.split(b"\n", 1)
    return line.decode().strip()


@dataclass
class Zygote:
    """One zygote process as the caller holds it: its socket, what it preloaded, whether it is usable."""

    device: str
    tier: str
    proc: subprocess.Popen[bytes]
    sock: socket.socket
    home: Path
    info: dict[str, Any] = field(default_factory=dict)
    started_at: float = field(default_factory=time.perf_counter)
    _ready: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, device: str, tier: str, env: Mapping[str, str]) -> Zygote:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        home = Path(tempfile.mkdtemp(prefix="tritonsmith-zygote-"))
        if device == "cuda":  # torch.cuda.is_available() through NVML: a fork-safe answer if an import asks
            env = {**env, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
        with open(home / "zygote.log", "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tritonsmith.evaluator.sandbox._zygote", str(theirs.fileno()), device, tier],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=dict(env), cwd=home,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        return cls(device=device, tier=tier, proc=proc, sock=ours, home=home)

    def wait_ready(self, timeout: float = _READY_TIMEOUT_S) -> dict[str, Any]:
        """Block until the zygote reports its imports and checks; raise ZygoteUnavailable if unusable."""
        with self._lock:
            if self._ready:
                return self.info
            if self.sock.fileno() < 0:
                raise ZygoteUnavailable(f"the {self.device} zygote ({self.tier}) was closed")
            ready, _, _ = select.select([self.sock], [], [], timeout)
            message = self.sock.recv(1 << 16) if ready else b""
            if not message:
                failure = ZygoteUnavailable(f"the {self.device} zygote ({self.tier}) did not start: {self.log_tail()}")
                self.close()
                raise failure
            self.info = json.loads(message)
            if self.info.get("unsafe"):
                self.close()
                raise ZygoteUnavailable(f"the {self.device} zygote ({self.tier}) is unsafe to fork: "
                                        f"{self.info['unsafe']}", unsafe=True)
            self._ready = True
            log.info("the %s zygote (%s) is ready: imports %.1f s, CUDA probe %.1f s, %.1f s after its start",
                     self.device, self.tier, self.info.get("import_s", 0.0), self.info.get("probe_s", 0.0),
                     time.perf_counter() - self.started_at)
            return self.info

    def launch(self, spec_path: Path, workdir: Path, log_fd: int, timeout_s: float,
               module: str = WORKER_MODULES[0]) -> tuple[ForkedWorker, int]:
        """Fork a worker running ``module``'s ``main`` on ``spec_path``; returns it and the write end of its
        stdin (for the key). ``module`` is one of :data:`WORKER_MODULES`."""
        if module not in WORKER_MODULES:
            raise ValueError(f"a zygote runs only {', '.join(WORKER_MODULES)}, not {module!r}")
        key_r, key_w = os.pipe()
        status_r, status_w = os.pipe()
        request = json.dumps({"argv": [str(spec_path)], "cwd": str(workdir), "timeout_s": timeout_s,
                              "module": module}).encode()
        try:
            socket.send_fds(self.sock, [request], [key_r, log_fd, status_w])
        except OSError as exc:
            for fd in (key_w, status_r):
                os.close(fd)
            failure = ZygoteUnavailable(f"the {self.device} zygote is gone ({exc}): {self.log_tail()}")
            self.close()
            raise failure from exc
        finally:
            os.close(key_r)
            os.close(status_w)
        worker = ForkedWorker(pid=0, status_fd=status_r)
        try:
            line = _read_line(worker, _READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            line = None
        if line is None or not line.startswith("pid "):
            os.close(key_w)
            os.close(status_r)
            failure = ZygoteUnavailable(f"the {self.device} zygote failed to fork a worker ({line!r}): {self.log_tail()}")
            self.close()
            raise failure
        worker.pid = int(line.split()[1])
        return worker, key_w

    @property
    def ready(self) -> bool:
        return self._ready

    def alive(self) -> bool:
        return self.proc.poll() is None and self.sock.fileno() >= 0

    def log_tail(self, limit: int = 1500) -> str:
        try:
            return (self.home / "zygote.log").read_bytes()[-limit:].decode(errors="replace").strip() or "(no output)"
        except OSError:
            return "(no log)"

    def close(self) -> None:
        """Close the socket (the zygote exits on EOF; running jobs keep their supervisors); kill it if it lingers."""
        self.sock.close()
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


class ZygotePool:
    """The zygotes of this process, one per (device, environment), started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._zygotes: dict[tuple[str, str], Zygote] = {}
        self._failures: Counter[tuple[str, str]] = Counter()  # zygotes that died or never started
        self._tier: Counter[tuple[str, str]] = Counter()  # tiers found unsafe to fork
        atexit.register(self.close)

    def get(self, device: str, env: Mapping[str, str]) -> tuple[Zygote, float]:
        """A ready zygote for ``device`` and the seconds spent waiting for it to start (0 when warm).

        Raises :class:`ZygoteUnavailable` when no zygote can be used (the caller spawns instead).
        """
        key = (device, _env_key(env))
        start = time.perf_counter()
        with self._lock:
            zygote = self._zygotes.get(key)
            if zygote is not None and not zygote.alive():
                log.warning("the %s zygote (pid %d) died; starting a new one", device, zygote.proc.pid)
                self._failures[key] += 1
                self._drop(key)
                zygote = None
            if zygote is None:
                zygote = self._start(key, device, env)
        waited = not zygote.ready
        while True:
            try:
                zygote.wait_ready()
                return zygote, (time.perf_counter() - start) if waited else 0.0
            except ZygoteUnavailable as exc:
                log.warning("%s", exc)
                with self._lock:
                    zygote = self._replace(key, device, env, zygote, unsafe=exc.unsafe)

    def _start(self, key: tuple[str, str], device: str, env: Mapping[str, str]) -> Zygote:
        if self._failures[key] >= _MAX_FAILURES:
            raise ZygoteUnavailable(f"the {device} zygote failed {_MAX_FAILURES} times; spawning workers instead")
        tiers = TIERS[device]
        if self._tier[key] >= len(tiers):
            raise ZygoteUnavailable(f"no {device} zygote is safe to fork; spawning workers instead")
        for old in [k for k in self._zygotes if k[0] == device]:  # the environment changed: retire the old one
            self._drop(old)
        zygote = Zygote.start(device, tiers[self._tier[key]], env)
        self._zygotes[key] = zygote
        return zygote

    def _replace(self, key: tuple[str, str], device: str, env: Mapping[str, str], failed: Zygote, *,
                 unsafe: bool) -> Zygote:
        current = self._zygotes.get(key)
        if current is not None and current is not failed:  # another thread already replaced it
            return current
        self._zygotes.pop(key, None)
        if unsafe:
            self._tier[key] += 1
        else:
            self._failures[key] += 1
        return self._start(key, device, env)

    def _drop(self, key: tuple[str, str]) -> None:
        zygote = self._zygotes.pop(key, None)
        if zygote is not None:
            zygote.close()

    def prestart(self, device: str, env: Mapping[str, str]) -> None:
        """Start the zygote for ``device`` now without waiting for it (e.g. while a candidate is generated)."""
        with self._lock:
            key = (device, _env_key(env))
            if key not in self._zygotes:
                try:
                    self._start(key, device, env)
                except ZygoteUnavailable as exc:
                    log.info("%s", exc)

    def pid(self, device: str, env: Mapping[str, str]) -> int | None:
        """The pid of the zygote serving ``device`` with this environment, if one runs."""
        zygote = self._zygotes.get((device, _env_key(env)))
        return zygote.proc.pid if zygote is not None and zygote.alive() else None

    def close(self) -> None:
        with self._lock:
            for key in list(self._zygotes):
                self._drop(key)


def _env_key(env: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()


POOL = ZygotePool()


# -- zygote side ----------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """``python -m tritonsmith.evaluator.sandbox._zygote FD DEVICE TIER``: preload, check, then serve until EOF."""
    sock = socket.socket(fileno=int(argv[1]))
    device, tier = argv[2], argv[3]
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    info = _preload(device, tier)
    info["unsafe"] = _unsafe(device)
    if not info["unsafe"] and device == "cuda":
        probe_start = time.perf_counter()
        info["unsafe"] = _probe_cuda()
        info["probe_s"] = round(time.perf_counter() - probe_start, 3)
    info["threads"] = _os_threads()
    info["device_files"] = _device_files()
    if info["unsafe"]:
        sock.send(json.dumps(info).encode())
        return 0
    import gc

    gc.collect()
    gc.freeze()  # keep the preloaded objects' pages shared with the workers (no refcount-driven copies by gc)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the kernel
    sock.send(json.dumps(info).encode())
    _serve(sock)
    return 0


def _preload(device: str, tier: str) -> dict[str, Any]:
    start = time.perf_counter()
    missing: list[str] = []
    for name in preload_modules(device, tier):
        try:
            importlib.import_module(name)
        except ImportError as exc:  # module layout differs across torch versions: import what exists
            missing.append(f"{name} ({exc})")
        except Exception as exc:  # a module that fails to import is left to the worker, which reports it
            missing.append(f"{name} ({type(exc).__name__}: {exc})")
    return {"pid": os.getpid(), "device": device, "tier": tier, "import_s": round(time.perf_counter() - start, 3),
            "missing": missing, "modules": len(sys.modules)}


def _unsafe(device: str) -> str | None:
    """Why forking this process would be unsafe for a worker, or None."""
    extra = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if extra:
        return f"Python threads running after the imports: {', '.join(extra)}"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialized by the imports"
    return None


def _device_files() -> list[str]:
    """GPU device files this process holds open (for the record: the CUDA probe decides)."""
    found = []
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/dev/nvidia"):
            found.append(target)
    return sorted(found)


def _probe_cuda() -> str | None:
    """Fork a child that initializes CUDA and runs one operation: the decisive test that forks work."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 5
        try:
            import torch

            x = torch.arange(8, device="cuda", dtype=torch.float32)
            code = 0 if float((x + 1).sum()) == 36.0 else 3
            torch.cuda.synchronize()
        except BaseException as exc:  # any failure means: do not fork workers from this zygote
            print(f"CUDA probe failed: {type(exc).__name__}: {exc}", flush=True)
            code = 4
        finally:
            os._exit(code)
    rc = _reap(pid, _READY_TIMEOUT_S / 2, group=False)
    return None if rc == 0 else f"a forked child could not use CUDA (probe exit code {rc})"


def _os_threads() -> list[str]:
    names = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
    except OSError:
        pass
    return names


def _serve(sock: socket.socket) -> None:
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
        except (ConnectionResetError, OSError):
            return
        if not message:  # the caller closed its end (or died): nothing more will come
            return
        try:
            request = json.loads(message)
            if len(fds) != 3:
                raise ValueError(f"expected 3 file descriptors, got {len(fds)}")
            pid = os.fork()
        except (ValueError, OSError) as exc:
            if len(fds) == 3:
                _write(fds[2], f"error {type(exc).__name__}: {exc}\n")
            for fd in fds:
                os.close(fd)
            continue
        if pid == 0:
            _supervise(sock, request, fds)
        for fd in fds:
            os.close(fd)


def _supervise(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the supervisor (a fork of the zygote): fork the worker, report its pid and exit code, reap it."""
    try:
        sock.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        key_fd, log_fd, status_fd = fds
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(status_fd)
            _become_worker(request, key_fd, log_fd)
        os.close(key_fd)
        os.close(log_fd)
        _write(status_fd, f"pid {pid}\n")
        rc = _reap(pid, float(request["timeout_s"]) + _SUPERVISOR_GRACE_S, group=True)
        _write(status_fd, f"exit {rc}\n")
    finally:
        os._exit(0)


def _reap(pid: int, limit_s: float, *, group: bool) -> int:
    """Wait for ``pid`` (killing it after ``limit_s``); with ``group``, kill what is left of its group first."""
    pidfd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], limit_s)
    finally:
        os.close(pidfd)
    if not ready:
        _kill(pid, group)
        _kill(pid, group=False)  # the worker itself, even if it never became its group's leader
    if group:
        # The leader is a zombie now: its pid (the group id) cannot be reused until it is reaped below.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        _kill(pid, group=True)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _kill(pid: int, group: bool) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _become_worker(request: dict[str, Any], key_fd: int, log_fd: int) -> NoReturn:
    """In the worker (a fork of the supervisor): a fresh session, stdin = key pipe, stdout/stderr = log."""
    code = 1
    try:
        os.setsid()
        os.dup2(key_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(key_fd)
        os.close(log_fd)
        os.chdir(request["cwd"])
        sys.stdin = open(0)  # noqa: SIM115  (the worker reads the key from it, then closes it)
        import random

        random.seed()  # forks share the zygote's state; a spawned worker would have a fresh seed
        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed()
        module = request.get("module", WORKER_MODULES[0])
        if module not in WORKER_MODULES:
            raise ValueError(f"refusing to run {module!r} in a forked worker")
        worker = importlib.import_module(module)
        sys.argv = [worker.__file__, *request["argv"]]
        code = worker.main(sys.argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # the worker's own failure: print it to the log the caller reads
        import traceback

        traceback.print_exc()
    finally:
        _flush_and_exit(code)


def _flush_and_exit(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _write(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode())
    except OSError:  # the caller is gone
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
