"""The reward of one attempt.

    reward = 0                                  for any failure (wrong output, compile error, crash, no code)
    reward = sigmoid(log(s)) = s / (1 + s)      for a correct kernel with speedup ``s`` over torch.compile

so parity gives 0.5, 2x gives 0.67, 10x gives 0.91, and a slower kernel stays between 0 and 0.5.
When torch.compile could not be timed (it failed on that problem) the speedup over eager is used and
the basis says so. On the CPU interpreter nothing is timed: a correct kernel then gets
:data:`UNMEASURED_REWARD` (0.5, "correct, speed unmeasured"), i.e. it is treated as parity, and its
basis is ``"unmeasured"`` so no one mistakes it for a measurement.

A *hybrid* kernel (PyTorch computed part of the result, as the ``hybrid`` policy allows) earns
:data:`~tritonsmith.core.contract.HYBRID_REWARD_FACTOR` (0.9) times that value, and its reward says what torch
computed, so a pure-Triton kernel of the same speed ranks higher.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tritonsmith.core.contract import HYBRID_REWARD_FACTOR, torch_computes, torch_computes_line
from tritonsmith.core.results import EvalResult

__all__ = ["UNMEASURED_REWARD", "Reward", "RewardBasis", "reward_for", "speedup_reward"]

RewardBasis = Literal["failed", "torch.compile", "eager", "unmeasured"]
UNMEASURED_REWARD = 0.5


@dataclass(frozen=True, kw_only=True)
class Reward:
    value: float
    basis: RewardBasis
    speedup: float | None = None
    torch_ops: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        if self.basis == "failed":
            return "0: not a correct kernel"
        hybrid = f" (hybrid x{HYBRID_REWARD_FACTOR:g}: {torch_computes_line(self.torch_ops)})" if self.torch_ops else ""
        if self.basis == "unmeasured":
            return f"{self.value:.2f}: correct, speed unmeasured (no GPU timing){hybrid}"
        return f"{self.value:.3f}: {self.speedup:.2f}x vs {self.basis}{hybrid}"


def speedup_reward(speedup: float) -> float:
    """``sigmoid(log(speedup))``: 0.5 at parity, towards 1 as the kernel gets faster."""
    if not speedup > 0 or math.isinf(speedup):
        raise ValueError(f"a speedup must be a positive finite number, got {speedup}")
    return speedup / (1.0 + speedup)


def reward_for(result: EvalResult | None) -> Reward:
    """The reward of an evaluated attempt (``None``: the generator produced no code)."""
    if result is None or not result.ok:
        return Reward(value=0.0, basis="failed")
    ops = torch_computes(result.checks)
    factor = HYBRID_REWARD_FACTOR if ops else 1.0
    bench = result.benchmark if result.device != "cpu" else None
    if bench is None:
        return Reward(value=UNMEASURED_REWARD * factor, basis="unmeasured", torch_ops=ops)
    if bench.speedup_vs_compile is not None:
        return Reward(value=speedup_reward(bench.speedup_vs_compile) * factor, basis="torch.compile",
                      speedup=bench.speedup_vs_compile, torch_ops=ops)
    return Reward(value=speedup_reward(bench.speedup_vs_eager) * factor, basis="eager",
                  speedup=bench.speedup_vs_eager, torch_ops=ops)
