"""Concise text for the generator: what to fix, or how fast it ran."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonsmith.core.contract import HYBRID_REWARD_FACTOR, rule_fix, torch_computes, torch_computes_line

if TYPE_CHECKING:
    from tritonsmith.core.results import EvalResult, Mismatch

__all__ = ["describe_mismatch", "diagnose", "format_feedback"]

_SHARE = 0.5  # a pattern shared by at least half of the wrong elements is named


def format_feedback(result: EvalResult, *, limit: int = 2500) -> str:
    lines = [f"status: {result.status.value} — {result.message}"]
    if result.rule:
        lines.append(f"rule broken: {rule_fix(result.rule) or result.rule}")
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
        lines.extend(describe_mismatch(m))
    ch = result.checks
    if ch and result.status.value in ("correct", "rejected") and (ops := torch_computes(ch)):
        lines.append(f"{torch_computes_line(ops)} ({ch.policy} policy: a hybrid kernel earns "
                     f"{HYBRID_REWARD_FACTOR:g}x the reward; move these into Triton)")
    if ch and ch.triton_share is not None:
        lines.append(f"Triton kernels: {ch.triton_share:.0%} of the candidate's GPU time")
    b = result.benchmark
    if b:
        lines.append(f"runtime {b.candidate.median_ms:.4f} ms (spread {b.candidate.spread:.1%}); eager "
                     f"{b.eager.median_ms:.4f} ms -> {b.speedup_vs_eager:.2f}x")
        if b.compiled:
            lines.append(f"torch.compile {b.compiled.median_ms:.4f} ms -> {b.speedup_vs_compile:.2f}x"
                         + (f" (95% CI {b.speedup_ci_vs_compile[0]:.2f}-{b.speedup_ci_vs_compile[1]:.2f})"
                            if b.speedup_ci_vs_compile else ""))
        lines.extend(b.notes)
    elif result.ok and result.timing_note:
        lines.append(result.timing_note)
    if result.generalizes:
        lines.append(f"generalizes: {result.generalizes} ({result.generalize_note})")
    if result.scaling_note:
        lines.append(result.scaling_note)
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit - 20] + "\n... (trimmed)"


def describe_mismatch(m: Mismatch) -> list[str]:
    """The pattern of a wrong output in one line, the inputs' ranges, and the diagnosis lines."""
    p = m.pattern or {}
    lines = []
    facts = [f"{name} {p[key]:.0%}" for name, key in (("zero", "zero"), ("NaN", "nan"), ("inf", "inf"))
             if p.get(key)]
    if p.get("constant"):  # a constant 0 is already said by "zero 100%"
        facts.append(f"all equal to {p['constant']:.6g}")
    if "rows" in p:
        facts.append(f"rows {p['rows'][0]}/{p['rows'][1]}, columns {p['cols'][0]}/{p['cols'][1]} "
                     f"({p['first_col']}..{p['last_col']})")
    if "ref_abs_max" in p:
        facts.append(f"reference |max| {p['ref_abs_max']:.3g}")
    if facts:
        lines.append("wrong elements: " + "; ".join(facts))
    if p.get("inputs"):
        lines.append("inputs: " + "; ".join(p["inputs"]))
    lines.extend(f"diagnosis: {d}" for d in diagnose(m))
    return lines


def diagnose(m: Mismatch) -> list[str]:
    """What a wrong output most likely means, most telling first (empty when nothing stands out)."""
    structural = {
        "shape": "a shape error, not a numerical one: allocate and return the output with the reference's shape "
                 "(check keepdim, squeeze/unsqueeze and the final view or reshape).",
        "dtype": "a dtype error: return the reference's dtype (allocate the output with the input's dtype, or "
                 "cast the fp32 accumulator when storing).",
        "device": "the output is on the wrong device: allocate it on the input's device.",
        "type": "the output is not what the reference returns (a tensor, or the same Python value).",
        "count": "return as many outputs as the reference does (a tuple when it returns several).",
    }
    if m.kind in structural:
        return [structural[m.kind]]
    p = m.pattern or {}
    n = p.get("mismatched") or m.mismatched or 0
    if not n:
        return []
    out: list[str] = []
    if p.get("reference_vs_float64"):  # alone: the other patterns would blame the kernel for the reference's rounding
        return [f"the reference is ill-conditioned on these inputs: run in full float32 it is itself up to "
                f"{p['reference_vs_float64']:.3g} from its float64 result, beyond the tolerance, so only a kernel "
                "that repeats its exact operation order can match it; the failure may be the problem's, not "
                "the kernel's (check the kernel with --tolerance numerics)."]
    if p.get("ref_finite_where_inf"):
        out.append(f"overflow: the candidate is inf/NaN at {p['ref_finite_where_inf']} of {n} wrong elements where "
                   f"the reference is finite (|max| {p.get('ref_abs_max', 0):.3g}): subtract the row maximum before "
                   "exp (fp32 exp overflows above ~88), scale before squaring, and accumulate in fp32.")
    elif p.get("nan", 0) >= _SHARE:
        out.append("NaN: a read of memory never written (torch.empty read before a store), 0/0, or log/sqrt of a "
                   "negative; give masked loads an `other=` value that is neutral for the operation.")
    if p.get("zero", 0) >= _SHARE:
        out.append(f"{p['zero']:.0%} of the wrong elements are 0 in the candidate: they were never written (the "
                   "grid or the loop does not reach them, or a store mask is too strict).")
    elif "constant" in p:
        out.append(f"the candidate holds {p['constant']:.6g} at every wrong element: one value broadcast, or an "
                   "accumulator that never saw the data.")
    out.extend(_where(p))
    ratio = p.get("mean_ratio")
    if not out and ratio is not None and abs(ratio - 1) > 0.05 and p.get("zero", 0) < _SHARE:
        out.append(f"the candidate is about {ratio:.3g}x the reference where wrong: a missing or extra factor "
                   "(scale, mean vs sum, normalisation).")
    return out


def _where(p: dict) -> list[str]:
    """Which part of the output is wrong: a tail of columns, some rows, or everything."""
    if "rows" not in p:
        return []
    (bad_rows, rows), (bad_cols, cols) = p["rows"], p["cols"]
    if bad_rows == rows and p["first_col"] > 0 and p["last_col"] == cols - 1:
        return [f"every row is wrong from column {p['first_col']} on (of {cols}): the last block of each row "
                "is not covered: loop over the row in BLOCK steps, or make BLOCK >= the row length "
                "(triton.next_power_of_2) with a mask."]
    if bad_rows < rows:
        partial = bad_rows - p.get("full_rows", 0)
        how = "each entirely" if partial == 0 else f"{partial} of them partly"
        return [f"only {bad_rows} of {rows} rows are wrong ({how}): the grid does not cover "
                "every row, or the row offset/stride is wrong for some programs."]
    return []
