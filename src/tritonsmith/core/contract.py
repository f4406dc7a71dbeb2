"""What "verified" means, stated once: the policy in force, what it allows, and every rule that rejects.

The prompt a model reads (``agents/prompts.py``), the feedback on a rejected candidate, the CLI line,
``report.md`` and the kernel memory all take their wording from here, so they cannot disagree with each
other or with the evaluator. The rules are the evaluator's registry (:data:`tritonsmith.core.rules.RULES`:
every rule the static checks, run-time guards and timing checks reject with, what it catches and its
fix) and the policies are the ones the evaluator enforces (``evaluator/_checks.py`` imports them from
here); a test reads the evaluator's sources and fails when a rule it rejects with is missing from the
registry or from the prompt.

Under ``hybrid`` a verified kernel may leave some compute to PyTorch. Such a kernel is *hybrid*: every
report says what torch computed ("torch computes: logsumexp"), its reward is scaled by
:data:`HYBRID_REWARD_FACTOR`, and the memory marks it so it is never offered as a pure-Triton example.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tritonsmith.core.rules import RULES, Rule

__all__ = [
    "DEFAULT_POLICY",
    "HYBRID_REWARD_FACTOR",
    "JUDGED_FP32_NOTE",
    "POLICIES",
    "POLICY_ALLOWS",
    "RULES",
    "Rule",
    "contract_text",
    "rule_fix",
    "torch_computes",
    "torch_computes_line",
]

POLICIES = ("hybrid", "strict")
DEFAULT_POLICY = "hybrid"
POLICY_ALLOWS: dict[str, str] = {
    "hybrid": ("PyTorch may keep some compute operations that have no Triton kernel yet (e.g. a convolution "
               "before a fused Triton epilogue); each one is reported as \"torch computes: ...\" and lowers the "
               "reward, and the candidate is rejected when PyTorch runs every compute operation of the "
               "reference. Write the arithmetic in Triton wherever you can."),
    "strict": ("all compute happens in @triton.jit kernels; PyTorch may only allocate outputs, reshape, view, "
               "copy and cast."),
}

# A verified hybrid kernel earns this fraction of the reward a pure-Triton kernel of the same speed earns.
HYBRID_REWARD_FACTOR = 0.9

# The evaluator's note on a candidate judged against the reference re-run in full float32 because PyTorch ran
# its convolutions/matmuls in TF32: the candidate is held to float32 accuracy while the baselines timed against
# it (eager, torch.compile) run those ops in one TF32 tensor-core pass. The floor's "slower" line reads it.
JUDGED_FP32_NOTE = ("judged against the reference run in full float32: PyTorch ran its convolutions/matmuls in TF32 "
                    "(cuDNN's default), which differs from an exact float32 result by more than the tolerance")


def rule_fix(rule: str | None) -> str | None:
    """``"rule (what it catches). Fix: ..."`` for a rule of the registry, None otherwise."""
    r = RULES.get(rule or "")
    return f"{r.name} ({r.catches}). Fix: {r.fix}." if r else None


def contract_text(policy: str) -> str:
    """The rules as a model reads them: the policy in force, what it allows, and every rejecting rule."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    rules = "\n".join(f"- `{r.name}`: {r.catches}" for r in RULES.values())
    return (f"Policy in force: `{policy}`: {POLICY_ALLOWS[policy]}\n"
            f"A candidate is rejected (reward 0) when it breaks any of these rules:\n{rules}")


def torch_computes(checks: Any) -> tuple[str, ...]:
    """The PyTorch compute ops of a candidate, from its ``ChecksReport`` (or its dict form).

    The ops seen while it ran win over the ones read from its source (a static op may sit in dead code).
    """
    if not checks:
        return ()
    ops: Iterable[Any] = checks.get("torch_ops", ()) if isinstance(checks, Mapping) else checks.torch_ops
    pairs = [(_get(o, "op"), _get(o, "origin")) for o in ops]
    runtime = [op for op, origin in pairs if origin == "runtime"]
    return tuple(dict.fromkeys(runtime or [op for op, _ in pairs]))


def torch_computes_line(ops: Iterable[str]) -> str:
    """``"torch computes: logsumexp, mean"`` (empty when PyTorch computed nothing)."""
    ops = list(ops)
    return f"torch computes: {', '.join(ops)}" if ops else ""


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)
