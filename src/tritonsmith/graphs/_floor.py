"""The floor: the loop never presents as its best a verified kernel slower than torch.compile by more than
noise while a verified kernel faster beyond noise exists, and says so when every verified kernel is slower.

"Beyond noise" reads the evaluator's 95% confidence interval of the speedup over torch.compile
(``BenchmarkReport.speedup_ci_vs_compile``); a result without one gets ``±NOISE`` around its median ratio.
Attempts timed against eager only (torch.compile failed) or not timed at all (the CPU interpreter) have no
speed against torch.compile: the floor has no say about them, the reward order stands.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tritonsmith.core.contract import JUDGED_FP32_NOTE

__all__ = ["NOISE", "CompileSpeed", "compile_speed", "floor_prefers", "slower_line"]

NOISE = 0.03  # relative half-width assumed for a speedup reported without an interval


@dataclass(frozen=True)
class CompileSpeed:
    """A verified attempt's speedup over torch.compile (median ratio) and its 95% interval."""

    speedup: float
    low: float
    high: float

    @property
    def slower(self) -> bool:
        """Slower than torch.compile beyond noise: the whole interval lies below parity."""
        return self.high < 1.0

    def faster_than(self, other: CompileSpeed) -> bool:
        """Faster than ``other`` beyond noise: the intervals do not overlap."""
        return self.low > other.high


def compile_speed(record: Mapping[str, Any] | None) -> CompileSpeed | None:
    """The speed of a verified attempt (an ``AttemptRecord``) against torch.compile, or None when it has none
    (failed, untimed, timed against eager only)."""
    if not record or record.get("reward", 0.0) <= 0.0 or record.get("reward_basis") != "torch.compile":
        return None
    speedup = record.get("speedup")
    if not speedup or speedup <= 0:
        return None
    bench = (record.get("result") or {}).get("benchmark") or {}
    ci = bench.get("speedup_ci_vs_compile")
    if ci and len(ci) == 2 and ci[0] is not None and ci[1] is not None and ci[0] <= speedup <= ci[1]:
        return CompileSpeed(float(speedup), float(ci[0]), float(ci[1]))
    return CompileSpeed(float(speedup), speedup * (1.0 - NOISE), speedup * (1.0 + NOISE))


def floor_prefers(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool | None:
    """Between two verified attempts: True when ``new`` must replace ``old`` (``old`` is slower than
    torch.compile beyond noise and ``new`` is faster than it beyond noise), False when ``old`` must stay (the
    same the other way round), None when the floor has no say and the reward order decides."""
    sn, so = compile_speed(new), compile_speed(old)
    if sn is None or so is None:
        return None
    if so.slower and sn.faster_than(so):
        return True
    if sn.slower and so.faster_than(sn):
        return False
    return None


def slower_line(best: Mapping[str, Any] | None, attempts: Iterable[Mapping[str, Any]]) -> str | None:
    """One line when the best verified attempt is slower than torch.compile beyond noise (so, by the floor,
    no verified attempt is faster beyond noise): how much slower, out of how many verified variants, and
    what the profiler said about it (its advice codes) when it was profiled. None otherwise."""
    speed = compile_speed(best)
    if speed is None or not speed.slower:
        return None
    timed = [a for a in attempts if compile_speed(a) is not None]
    n = max(len({a.get("iteration") for a in timed}), 1)
    line = (f"slower than torch.compile: {speed.speedup:.2f}x (95% CI {speed.low:.2f}-{speed.high:.2f}; "
            f"best of {n} verified variant{'s' if n != 1 else ''})")
    line += _precision_reason(best)
    profile = str((best or {}).get("profile") or "").strip()
    if not profile:
        return line + "; profiler: not run on it"
    from tritonsmith.profiler import hint_codes  # the state module imports this one: keep it light

    codes = hint_codes(profile)
    return line + f"; profiler: {', '.join(codes) if codes else profile.splitlines()[0][:200]}"


def _precision_reason(best: Mapping[str, Any] | None) -> str:
    """Why, known without a profile: the evaluator judged the kernel against the reference re-run in full float32
    because PyTorch ran its convolutions/matmuls in TF32, so torch.compile was timed doing them in one TF32
    tensor-core pass while the kernel is held to float32 accuracy (tf32x3 takes three passes)."""
    checks = ((best or {}).get("result") or {}).get("checks") or {}
    if JUDGED_FP32_NOTE not in (checks.get("notes") or ()):
        return ""
    return ("; torch.compile ran its convolutions/matmuls in TF32 (one tensor-core pass), this kernel is held to "
            "float32 accuracy (tf32x3: three passes)")
