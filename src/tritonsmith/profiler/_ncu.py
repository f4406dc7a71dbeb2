"""Hardware counters of the top kernels of one forward, through Nsight Compute (``ncu``).

``run_ncu`` profiles a small driver (``python -m tritonsmith.profiler._ncu SPEC.json``) that builds the
model and inputs, warms up outside the profiled range (JIT compiles, autotuning), then runs exactly one
forward between ``cudaProfilerStart``/``Stop``. ncu runs with ``--clock-control none`` (the clocks the
timings saw) and a short metric list, so each kernel needs few replay passes.

``NcuJob`` starts ncu before the profiler's timing worker: the driver imports torch and triton meanwhile
(CPU only) and waits for the parent's go file before its first CUDA call, so its start-up overlaps the
timings while its kernels never do.

A missing ``ncu``, missing permissions (``ERR_NVGPUCTRPERM``), a timeout or output we cannot parse all
give an :class:`NcuReport` whose ``status`` is not ``ok`` and whose ``note`` says why; never an error.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

NcuStatus = Literal["ok", "unavailable", "failed", "timeout"]

# metric name -> field of NcuKernel
METRICS: dict[str, str] = {
    "gpu__time_duration.sum": "duration_us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "compute_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__registers_per_thread": "registers",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": "local_load_bytes",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": "local_store_bytes",
    "launch__grid_size": "grid_size",
    "launch__block_size": "block_size",
}
_CORE_METRICS = tuple(list(METRICS)[:8])
_UNIT = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "KB": 1e3, "MB": 1e6, "GB": 1e9}
_CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")


@dataclass(frozen=True, kw_only=True)
class NcuKernel:
    """Counters of one profiled kernel launch (percentages are of the device's peak)."""

    name: str
    duration_us: float | None = None
    dram_pct: float | None = None
    compute_pct: float | None = None
    memory_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    registers: float | None = None
    l2_hit_pct: float | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    local_load_bytes: float | None = None
    local_store_bytes: float | None = None
    grid_size: float | None = None
    block_size: float | None = None

    @property
    def dram_bytes(self) -> float | None:
        if self.dram_read_bytes is None and self.dram_write_bytes is None:
            return None
        return (self.dram_read_bytes or 0.0) + (self.dram_write_bytes or 0.0)

    @property
    def spill_traffic_bytes(self) -> float | None:
        if self.local_load_bytes is None and self.local_store_bytes is None:
            return None
        return (self.local_load_bytes or 0.0) + (self.local_store_bytes or 0.0)

    def describe(self) -> str:
        def pct(v: float | None) -> str:
            return f"{v:.0f}%" if v is not None else "?"

        parts = [f"{self.duration_us:.1f} us" if self.duration_us is not None else "? us",
                 f"DRAM {pct(self.dram_pct)}", f"compute {pct(self.compute_pct)}",
                 f"occupancy {pct(self.achieved_occupancy_pct)}", f"L2 hit {pct(self.l2_hit_pct)}"]
        if self.registers is not None:
            parts.append(f"{self.registers:.0f} regs")
        if self.spill_traffic_bytes:
            parts.append(f"local-memory traffic {self.spill_traffic_bytes / 1e6:.1f} MB (spills)")
        return f"{self.name[:60]}: " + ", ".join(parts)


@dataclass(frozen=True, kw_only=True)
class NcuReport:
    status: NcuStatus
    note: str = ""
    target: str = ""
    kernels: tuple[NcuKernel, ...] = field(default_factory=tuple)
    total_kernels: int = 0
    wall_s: float = 0.0


def find_ncu() -> str | None:
    """``$TRITONSMITH_NCU``, else ``ncu`` on PATH, else the usual CUDA install locations."""
    env = os.environ.get("TRITONSMITH_NCU")
    if env:
        return env if Path(env).is_file() else None
    found = shutil.which("ncu")
    if found:
        return found
    return next((c for c in _CANDIDATES if Path(c).is_file()), None)


def run_ncu(spec_path: Path, *, target: str, timeout_s: float = 90.0, launch_count: int = 24, top: int = 4,
            env: dict[str, str] | None = None, ncu: str | None = None) -> NcuReport:
    """Profile the forward described by ``spec_path`` under ncu; see the module docstring."""
    tool = ncu or find_ncu()
    if tool is None:
        return NcuReport(status="unavailable", target=target, note="ncu (Nsight Compute) not found; counters skipped")
    log_path = spec_path.with_suffix(".ncu.log")
    started = time.perf_counter()
    metrics = list(METRICS)
    for _attempt in range(2):
        cmd = [tool, "--clock-control", "none", "--profile-from-start", "off", "--launch-count", str(launch_count),
               "--csv", "--page", "details", "--metrics", ",".join(metrics),
               sys.executable, "-m", "tritonsmith.profiler._ncu", str(spec_path)]
        code, timed_out, output, _ = run_process(cmd, timeout_s=timeout_s, env=env, log_path=log_path)
        if timed_out or "Failed to find metric" not in output or len(metrics) == len(_CORE_METRICS):
            break
        metrics = list(_CORE_METRICS)  # an ncu that lacks one of the extra metrics rejects the whole list
    wall = time.perf_counter() - started
    if timed_out:
        return NcuReport(status="timeout", target=target, wall_s=wall, note=f"ncu did not finish in {timeout_s:.0f} s")
    kernels = parse_ncu_csv(output)
    if not kernels:
        return NcuReport(status="failed", target=target, wall_s=wall,
                         note=f"ncu gave no kernel metrics (exit {code}): {_ncu_error(output)}")
    ranked = sorted(kernels, key=lambda k: -(k.duration_us or 0.0))
    return NcuReport(status="ok", target=target, kernels=tuple(ranked[:top]), total_kernels=len(kernels), wall_s=wall,
                     note="" if code == 0 else f"ncu exited {code} after profiling")


GO_CANDIDATE, GO_REFERENCE, GO_CANCEL = "candidate", "reference", "cancel"


class NcuJob:
    """ncu running in a background thread, its driver held at the go file until :meth:`go` or :meth:`cancel`."""

    def __init__(self, spec: dict[str, Any], workdir: Path, *, timeout_s: float, env: dict[str, str] | None = None,
                 ncu: str | None = None) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.go_path = workdir / "ncu.go"
        spec_path = workdir / "ncu_spec.json"
        spec_path.write_text(json.dumps({**spec, "go_path": str(self.go_path), "go_timeout_s": timeout_s}))
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tritonsmith-ncu")
        self._future = self._pool.submit(run_ncu, spec_path, target=GO_CANDIDATE, timeout_s=timeout_s, env=env, ncu=ncu)
        self._signalled = False

    def go(self, target: str) -> NcuReport:
        """Let the driver profile ``target`` (``candidate`` or ``reference``) now; wait for the report."""
        started = time.perf_counter()
        self._signal(target)
        report = self._finish()
        return dataclasses.replace(report, target=target, wall_s=round(time.perf_counter() - started, 2))

    def cancel(self) -> None:
        """No counters wanted after all (the worker failed): the driver exits unprofiled. No-op after go()."""
        if not self._signalled:
            self._signal(GO_CANCEL)
            self._finish()

    def _signal(self, word: str) -> None:
        self._signalled = True
        tmp = self.go_path.with_suffix(".tmp")
        tmp.write_text(word)
        tmp.replace(self.go_path)  # atomic: the driver never reads half a word

    def _finish(self) -> NcuReport:
        try:
            return self._future.result()
        finally:
            self._pool.shutdown(wait=True)


def wait_for_go(path: Path, timeout_s: float) -> str:
    """The word the parent wrote into ``path`` (``cancel`` when nothing came within ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and (word := path.read_text().strip()):
            return word
        time.sleep(0.02)
    return GO_CANCEL


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """Kernels from ``ncu --csv --page details`` output (one row per kernel and metric; other lines ignored)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    by_id: dict[str, dict[str, Any]] = {}
    for row in rows:
        metric = row.get("Metric Name") or ""
        field_name = METRICS.get(metric)
        kid = row.get("ID") or ""
        if not kid or row.get("ID") == "ID":
            continue
        entry = by_id.setdefault(kid, {"name": row.get("Kernel Name") or row.get("Function Name") or "?"})
        if field_name:
            value = _number(row.get("Metric Value", ""), row.get("Metric Unit", ""))
            if value is not None:
                entry[field_name] = value
    return [NcuKernel(**entry) for entry in by_id.values()]


def _number(value: str, unit: str) -> float | None:
    text = value.replace(",", "").strip()
    try:
        number = float(text)
    except ValueError:
        return None
    return number * _UNIT.get(unit.strip(), 1.0)


def _ncu_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if "==ERROR==" in ln or "==WARNING==" in ln or "Error" in ln]
    if any("ERR_NVGPUCTRPERM" in ln for ln in lines):
        return "no permission to read GPU performance counters (ERR_NVGPUCTRPERM)"
    tail = lines[-3:] or [ln for ln in output.splitlines() if ln.strip()][-3:]
    return " | ".join(tail)[:500] or "no output"


def run_process(cmd: list[str], *, timeout_s: float, env: dict[str, str] | None,
                log_path: Path) -> tuple[int | None, bool, str, float]:
    """Run ``cmd`` in its own session with output to ``log_path``; kill the whole group at the timeout.

    Returns (exit code, timed out, output, wall seconds).
    """
    start = time.perf_counter()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    text = log_path.read_bytes().decode(errors="replace")
    return proc.returncode, timed_out, text, time.perf_counter() - start


# -- driver (runs under ncu) ----------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """Build the model named by the spec, warm up, and run one forward inside the profiled range."""
    import torch
    import triton  # noqa: F401  (imported before the go signal: start-up that needs no GPU)

    from tritonsmith.core.problem_meta import exec_reference
    from tritonsmith.evaluator.sandbox import Job, build_models, input_factory, load_candidate

    spec = json.loads(Path(argv[1]).read_text())
    if spec.get("go_path"):
        word = wait_for_go(Path(spec["go_path"]), float(spec.get("go_timeout_s", 600.0)))
        if word not in (GO_CANDIDATE, GO_REFERENCE):
            return 0
        if word == GO_REFERENCE:
            spec["candidate_path"] = None
    job = Job({**spec, "candidate_path": spec.get("candidate_path") or spec["problem_path"], "device": "cuda",
               "stage_path": str(Path(argv[1]).with_suffix(".ncu.stage"))})
    ref_module = exec_reference(Path(spec["problem_path"]).read_text(), spec["problem_name"])
    cls = load_candidate(job) if spec.get("candidate_path") else ref_module.Model
    _, model, _ = build_models(job, ref_module, cls)
    args = input_factory(job, ref_module)(int(spec.get("seed", 0)) + 7919)
    with torch.no_grad():
        for _ in range(2):
            model(*args)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        model(*args)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(sys.argv))
