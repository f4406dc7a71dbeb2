"""The profiler's advice, read by the built-in generator to order its remaining variants.

The graph appends the profile of a correct attempt to that attempt's feedback; its ``hints:`` line
(:func:`tritonsmith.profiler.hint_codes`) names what limits the kernel. Each code maps to words of
the variant keys that address it: a kernel with too few programs tries the split variants first, one
that spills tries smaller tiles first, one within reach of the speed of light stops refining.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from tritonsmith.profiler import hint_codes

if TYPE_CHECKING:
    from tritonsmith.agents.base import Attempt

__all__ = ["NEAR_PEAK_NOTE", "order_by_hints", "profile_hints"]

NEAR_PEAK_NOTE = "the profiler puts the last verified kernel within reach of the speed of light: nothing left to try"

# advice code -> words of variant keys that address it, best first
_PREFER: dict[str, tuple[str, ...]] = {
    "few_programs": ("split", "64x128", "64x64", "cols-32", "window-256", "scan-1k"),
    "low_occupancy": ("64x128", "64x64", "split", "multipass", "cols-32", "window-256", "scan-1k"),
    "spills": ("64x128", "64x64", "multipass", "cols-32", "unpaired"),
    "shared_memory": ("64x128", "64x64"),
    "extra_dram_traffic": ("nosplit", "wide"),
    "launch_bound": ("nosplit", "no-split-k", "4096"),
    "memory_bound": ("4096", "wide", "split"),
    "compute_bound": ("128x256", "128x128"),
}


def profile_hints(history: Sequence[Attempt]) -> tuple[str, ...]:
    """The advice codes of the latest correct attempt that carries a profile (empty when none does)."""
    for attempt in reversed(history):
        if attempt.result is not None and attempt.result.ok and "hints:" in attempt.feedback:
            return hint_codes(attempt.feedback.split("profiler:", 1)[-1])
    return ()


class _Keyed(Protocol):
    """What the ordering reads of a variant (``_variants.Variant``): its key. A protocol, so that this
    module does not name ``_variants``, which imports it."""

    @property
    def key(self) -> str: ...


V = TypeVar("V", bound=_Keyed)


def order_by_hints(variants: Sequence[V], codes: Sequence[str]) -> list[V]:
    """``variants`` with those addressing the first actionable code first (in that code's order); stable."""
    words = next((_PREFER[c] for c in codes if c in _PREFER), ())

    def rank(v: V) -> int:
        return next((i for i, w in enumerate(words) if w in v.key), len(words))

    return sorted(variants, key=rank)
