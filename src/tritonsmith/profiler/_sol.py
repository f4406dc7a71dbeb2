"""Speed of light: the least work a problem needs, and the fastest a device can do it.

Work is counted once per problem: FLOPs from torch's FLOP counter (matmuls, convolutions, attention:
the tensor-core work) run on the ``meta`` device by :meth:`Problem.inspect`, and the fewest bytes any
implementation must move, each input read once, each output written once, each parameter read once.

Ceilings are per device: the bandwidth of a large device-to-device copy and the dense matmul rate per
dtype, measured once on the GPU and cached on disk under the per-user cache directory
(``$TRITONSMITH_CACHE_DIR``, else ``$XDG_CACHE_HOME/tritonsmith``, else ``~/.cache/tritonsmith``).
Without a measurement, a datasheet table for Hopper parts stands in and says so.

The floor time is the roofline's: ``max(bytes / bandwidth, flops / matmul_rate)``; the problem is
memory-bound when its arithmetic intensity (FLOPs per byte) is below the device's ridge point
(``matmul_rate / bandwidth``). ``% of speed of light = floor / measured time``.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tritonsmith.core.device import DATASHEET_PEAKS as _DATASHEET
from tritonsmith.core.paths import cache_dir

if TYPE_CHECKING:
    from tritonsmith.core.problem import ProblemInfo

log = logging.getLogger(__name__)

Bound = Literal["memory", "compute"]
_CEILINGS_FILE = "ceilings.json"
# Which matmul rate bounds a problem's FLOPs, by the dtype of its data. float32 maps to TF32: tl.dot's
# default input precision, and inside KernelBench's tolerance; the strict-fp32 rate is kept as "fp32".
_MATH_MODE = {"float32": "tf32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}


@dataclass(frozen=True, kw_only=True)
class WorkCount:
    """The least work a problem needs: tensor-core FLOPs and the fewest bytes moved through DRAM."""

    flops: int | None
    input_bytes: int
    output_bytes: int
    parameter_bytes: int
    dtype: str

    @property
    def min_bytes(self) -> int:
        return self.input_bytes + self.output_bytes + self.parameter_bytes

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte of the minimum traffic; None when the FLOPs are unknown."""
        if self.flops is None or self.min_bytes == 0:
            return None
        return self.flops / self.min_bytes


@dataclass(frozen=True, kw_only=True)
class DeviceCeilings:
    """Peak rates of one device: copy bandwidth (GB/s, 1e9) and dense matmul TFLOP/s per math mode."""

    device_name: str
    bandwidth_gbs: float
    matmul_tflops: dict[str, float]
    source: Literal["measured", "datasheet"]
    measured_at: str | None = None
    note: str | None = None

    def matmul_rate(self, dtype: str) -> tuple[float | None, str]:
        """TFLOP/s that bounds FLOPs on ``dtype`` data, and the math mode it stands for."""
        mode = _MATH_MODE.get(dtype.removeprefix("torch."), "fp16")
        return self.matmul_tflops.get(mode), mode

    def ridge_point(self, dtype: str) -> float | None:
        """FLOPs per byte above which a problem is compute-bound on this device."""
        rate, _ = self.matmul_rate(dtype)
        return rate * 1e12 / (self.bandwidth_gbs * 1e9) if rate else None


@dataclass(frozen=True, kw_only=True)
class SpeedOfLight:
    """The roofline floor of one problem on one device."""

    bound: Bound
    floor_ms: float
    memory_floor_ms: float
    compute_floor_ms: float | None
    arithmetic_intensity: float | None
    ridge_point: float | None
    math_mode: str
    ceilings_source: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def percent(self, measured_ms: float | None) -> float | None:
        """``floor / measured`` in percent; None without a measurement."""
        if measured_ms is None or measured_ms <= 0:
            return None
        return 100.0 * self.floor_ms / measured_ms





def work_count(info: ProblemInfo) -> WorkCount:
    """Count FLOPs and the fewest bytes from an inspected problem (see :meth:`Problem.inspect`)."""
    floats = [s for s in (*info.inputs, *(p for _, p in info.parameters)) if "float" in s.dtype]
    dtype = max(floats, key=lambda s: s.numel).dtype if floats else "float32"
    return WorkCount(flops=info.flops, input_bytes=info.input_bytes, output_bytes=info.output_bytes,
                     parameter_bytes=info.parameter_bytes, dtype=dtype.removeprefix("torch."))


def speed_of_light(work: WorkCount, ceilings: DeviceCeilings) -> SpeedOfLight:
    """The roofline floor of ``work`` on a device with ``ceilings``."""
    rate, mode = ceilings.matmul_rate(work.dtype)
    memory_ms = work.min_bytes / (ceilings.bandwidth_gbs * 1e9) * 1e3
    notes: list[str] = []
    compute_ms: float | None = None
    if work.flops is None:
        notes.append("FLOPs unknown (the reference has an op without a meta kernel): memory floor only")
    elif rate is None:
        notes.append(f"no matmul rate known for {mode}: memory floor only")
    else:
        compute_ms = work.flops / (rate * 1e12) * 1e3
    if mode == "tf32" and compute_ms:
        notes.append("float32 FLOPs are bounded by the TF32 tensor-core rate (tl.dot's default precision)")
    bound: Bound = "compute" if compute_ms is not None and compute_ms > memory_ms else "memory"
    return SpeedOfLight(bound=bound, floor_ms=max(memory_ms, compute_ms or 0.0), memory_floor_ms=memory_ms,
                        compute_floor_ms=compute_ms, arithmetic_intensity=work.arithmetic_intensity,
                        ridge_point=ceilings.ridge_point(work.dtype), math_mode=mode,
                        ceilings_source=f"{ceilings.source} ceilings of {ceilings.device_name}", notes=tuple(notes))


def datasheet_ceilings(device_name: str) -> DeviceCeilings | None:
    """Datasheet peaks for a known device name (H100/H200 families), else None."""
    for key, bandwidth, rates in _DATASHEET:
        if key.lower() in device_name.lower():
            return DeviceCeilings(device_name=device_name, bandwidth_gbs=bandwidth, matmul_tflops=dict(rates),
                                  source="datasheet", note=f"NVIDIA datasheet peaks for {key} (dense)")
    return None


def load_cached_ceilings(device_name: str) -> DeviceCeilings | None:
    """Ceilings measured earlier on a device of this name, if cached."""
    entry = _read_cache().get(device_name)
    if not entry:
        return None
    try:
        return DeviceCeilings(**entry)
    except TypeError:
        log.warning("ignoring malformed cached ceilings for %s", device_name)
        return None


def store_ceilings(ceilings: DeviceCeilings) -> Path:
    """Add ``ceilings`` to the on-disk cache (atomic replace) and return the cache file."""
    path = cache_dir() / _CEILINGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read_cache()
    data[ceilings.device_name] = asdict(ceilings)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)
    return path


def ceilings_for(device_name: str, *, measure: bool = False) -> DeviceCeilings | None:
    """Cached measurement, else (``measure=True``, on the GPU itself) a new one, else the datasheet."""
    cached = load_cached_ceilings(device_name)
    if cached is not None:
        return cached
    if measure:
        measured = measure_ceilings()
        store_ceilings(measured)
        return measured
    return datasheet_ceilings(device_name)


def measure_ceilings(device: int = 0) -> DeviceCeilings:
    """Measure copy bandwidth and dense matmul rates on CUDA ``device`` (about two seconds)."""
    import torch

    name = torch.cuda.get_device_name(device)
    with torch.cuda.device(device):
        src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")  # 1 GiB: far beyond L2
        dst = torch.empty_like(src)
        copy_ms = _best_ms(lambda: dst.copy_(src), reps=10)
        bandwidth = 2 * src.numel() * src.element_size() / (copy_ms * 1e-3) / 1e9
        del src, dst
        rates = {mode: _matmul_tflops(mode) for mode in ("fp16", "bf16", "tf32", "fp32")}
        torch.cuda.empty_cache()
    log.info("measured ceilings of %s: %.0f GB/s, %s TFLOP/s", name, bandwidth, rates)
    return DeviceCeilings(device_name=name, bandwidth_gbs=round(bandwidth, 1), matmul_tflops=rates,
                          source="measured", measured_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                          note=f"copy of 1 GiB; square matmuls; torch {torch.__version__}")


def _matmul_tflops(mode: str) -> float:
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mode, torch.float32)
    n = 4096 if mode == "fp32" else 8192
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    try:
        ms = _best_ms(lambda: torch.mm(a, b), reps=8)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return round(2 * n**3 / (ms * 1e-3) / 1e12, 1)


def _best_ms(fn: Any, *, reps: int) -> float:
    """Fastest of ``reps`` CUDA-event timings after two warm-up calls (a ceiling is an upper bound)."""
    import torch

    for _ in range(2):
        fn()
    best = float("inf")
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def _read_cache() -> dict[str, Any]:
    path = cache_dir() / _CEILINGS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        log.warning("ignoring unreadable ceilings cache %s: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}
