"""Concise text for the generator: what to fix, or how fast it ran."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonsmith.tools._results import EvalResult


def format_feedback(result: EvalResult, *, limit: int = 2500) -> str:
    lines = [f"status: {result.status.value} — {result.message}"]
    if result.rule:
        lines.append(f"rule broken: {result.rule}")
    if result.stage and not result.ok:
        lines.append(f"stage: {result.stage}")
    if result.error:
        lines.append(result.error)
    c = result.correctness
    if c and c.mismatch:
        m = c.mismatch
        extra = []
        if m.first_bad_index is not None:
            extra.append(f"first bad index {list(m.first_bad_index)}: got {m.candidate_value:.6g}, "
                         f"expected {m.reference_value:.6g}")
        if m.nan_count:
            extra.append(f"{m.nan_count} NaN in the output")
        if m.inf_count:
            extra.append(f"{m.inf_count} Inf in the output")
        lines.extend(extra)
    ch = result.checks
    if ch and ch.torch_ops and result.status.value in ("correct", "rejected"):
        ops = ", ".join(f"{o.op} x{o.count}" for o in ch.torch_ops if o.origin == "runtime")
        if ops:
            lines.append(f"PyTorch computes ({ch.policy} policy): {ops}")
    b = result.benchmark
    if b:
        lines.append(f"runtime {b.candidate.median_ms:.4f} ms (spread {b.candidate.spread:.1%}); eager "
                     f"{b.eager.median_ms:.4f} ms -> {b.speedup_vs_eager:.2f}x")
        if b.compiled:
            lines.append(f"torch.compile {b.compiled.median_ms:.4f} ms -> {b.speedup_vs_compile:.2f}x")
        lines.extend(b.notes)
    elif result.ok and result.timing_note:
        lines.append(result.timing_note)
    if result.scaling_note:
        lines.append(result.scaling_note)
    if result.generalizes:
        lines.append(f"generalizes: {result.generalizes} ({result.generalize_note})")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit - 20] + "\n... (trimmed)"
