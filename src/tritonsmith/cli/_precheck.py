"""Before the first generation: the reference runs (checked as the evaluator checks it), and on the CPU an
estimate of how long one evaluation will take in the Triton interpreter.

The estimate only warns and suggests ``--scale``; it never scales by itself: a kernel verified on shrunk
shapes is a different claim from one verified on the problem as given, and the user makes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem, ProblemInfo

__all__ = ["SLOW_EVAL_S", "Precheck", "interpreter_seconds", "precheck"]

# Measured on the development machine (2 shared cores, 2026-12-04) with the built-in generator's kernels
# for 19_ReLU, 23_Softmax, 1_Conv2D_ReLU_BiasAdd and 16_Matmul (scaled): one trial in the interpreter costs
# about 2.8 us per element read or written plus 4 ns per FLOP. An estimate, good to a factor of a few.
_S_PER_ELEMENT = 2.8e-6
_S_PER_FLOP = 4e-9
_FIXED_S = 1.0  # loading the reference and the candidate, the guards
SLOW_EVAL_S = 60.0  # above this, say so before the run starts
CPU_TIMEOUT_S = 600.0  # the evaluator's default limit on the CPU


@dataclass(frozen=True, kw_only=True)
class Precheck:
    reference_s: float | None  # the reference's CPU forward, None when too large to run up front
    estimate_s: float | None  # one interpreter evaluation (device cpu only)
    lines: list[str] = field(default_factory=list)  # what to tell the user


def interpreter_seconds(info: ProblemInfo, trials: int) -> float:
    """About how long one CPU evaluation of a kernel for a problem of this size takes (Triton interpreter)."""
    elements = (info.input_bytes + info.output_bytes + info.parameter_bytes) / 4
    return _FIXED_S + trials * (elements * _S_PER_ELEMENT + (info.flops or 0) * _S_PER_FLOP)


def precheck(problem: Problem, *, device: str, scale: bool, trials: int, timeout_s: float | None = None) -> Precheck:
    """Check the reference once (raises ``ProblemError`` as ``tritonsmith eval`` would) and size the work."""
    from tritonsmith.core.problem_meta import check_reference
    from tritonsmith.core.device import resolve_device

    run = problem.scaled() if scale else problem
    seconds = check_reference(run)
    lines = [f"  reference: runs ({seconds:.1f} s on the CPU)" if seconds is not None else
             "  reference: too large to run on the CPU up front; the first evaluation checks it"]
    estimate = None
    if resolve_device(device) == "cpu":
        estimate = interpreter_seconds(run.inspect(), trials)
        if estimate > SLOW_EVAL_S:
            advice = ("--scale shrinks its shapes (reported): about "
                      f"{_duration(interpreter_seconds(problem.scaled().inspect(), trials))} then"
                      if not scale else "even scaled; fewer --trials shortens it")
            limit = timeout_s or CPU_TIMEOUT_S
            over = f", past the evaluator's {limit:.0f} s limit (it would time out)" if estimate > limit else ""
            lines.append(f"[yellow]warning:[/yellow] one CPU evaluation of this problem takes about "
                         f"{_duration(estimate)} in the Triton interpreter ({trials} trials){over}; {advice}. "
                         "Ctrl-C stops at any time and keeps the finished attempts.")
    return Precheck(reference_s=seconds, estimate_s=estimate, lines=lines)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"
