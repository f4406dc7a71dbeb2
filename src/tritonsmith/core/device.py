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

__all__ = ["DEFAULT_DEVICE", "Device", "ResolvedDevice", "gpu_likely", "resolve_device"]

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
