"""The device a run uses: resolved once, from one setting with one default.

``Settings.device`` (``auto`` | ``cuda`` | ``cpu``, default :data:`DEFAULT_DEVICE` = ``auto``) is resolved
by :func:`resolve_device` to ``cuda`` or ``cpu`` once per run: by the graph's ``analyze`` node, which puts
the answer in the state for every later node, or by ``evaluate()`` for a call on its own. ``auto`` means
CUDA when a GPU is visible, else the CPU (the Triton interpreter: correctness only, no timing).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

__all__ = ["DATASHEET_PEAKS", "DEFAULT_DEVICE", "datasheet_bandwidth_gbs", "Device", "ResolvedDevice", "gpu_likely", "resolve_device"]

Device = Literal["auto", "cpu", "cuda"]
ResolvedDevice = Literal["cpu", "cuda"]

DEFAULT_DEVICE: Device = "auto"


def resolve_device(device: str = DEFAULT_DEVICE) -> ResolvedDevice:
    """``auto`` picks CUDA when a GPU is visible. Asking for CUDA without one is an error."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', not {device!r}")
    if device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise ValueError("device='cuda' but no CUDA GPU is visible; use device='cpu' for the Triton interpreter")
    return "cpu"


def gpu_likely() -> bool:
    """Whether a CUDA GPU is probably usable, from the device nodes alone (no torch, no driver call)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1"):
        return False
    return Path("/dev/nvidiactl").exists()


# Dense (no sparsity) datasheet peaks. Matched by substring of torch.cuda.get_device_name(), in order.
DATASHEET_PEAKS: tuple[tuple[str, float, dict[str, float]], ...] = (
    ("H200 NVL", 4800.0, {"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5, "fp64": 30.0}),
    ("H200", 4800.0, {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp64": 33.5}),
    ("H100 PCIe", 2000.0, {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0, "fp64": 25.6}),
    ("H100 NVL", 3900.0, {"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5, "fp64": 30.0}),
    ("H100", 3350.0, {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp64": 33.5}),
)


def datasheet_bandwidth_gbs(device_name: str) -> float | None:
    """The datasheet memory bandwidth (GB/s) of a known device name (H100/H200 families), else None."""
    for key, bandwidth, _rates in DATASHEET_PEAKS:
        if key.lower() in device_name.lower():
            return bandwidth
    return None
