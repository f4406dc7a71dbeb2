"""The profiler: where a candidate's time goes, and how far it is from the speed of light.

``profile_kernel`` is the entry point (``profile``); inside: ``_torch_profile`` (per-kernel breakdown in a
worker), ``_ncu`` (hardware counters), ``_aot`` (Triton compile facts, ahead of time on a CPU) and ``_sol``
(FLOPs, bytes and the device's ceilings). Its workers run in the evaluator's sandbox. Importing this
package loads nothing heavy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["HINTS_PREFIX", "ImplProfile", "ProfileReport", "ProfileStatus", "hint_codes", "profile_kernel"]

_LAZY = {name: "tritonsmith.profiler.profile" for name in __all__}

if TYPE_CHECKING:
    from tritonsmith.profiler.profile import (
        HINTS_PREFIX,
        ImplProfile,
        ProfileReport,
        ProfileStatus,
        hint_codes,
        profile_kernel,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith.profiler' has no attribute {name!r}")
