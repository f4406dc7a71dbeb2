"""Correctness trials: fresh seeded inputs per trial, separate copies for reference and candidate."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tritonsmith._problem_meta import flatten_outputs
from tritonsmith.tools._compare import compare

if TYPE_CHECKING:
    from tritonsmith.tools._worker import Job


def run_trials(job: Job, ref_model: Any, cand_model: Any, make_inputs: Callable[[int], list[Any]]) -> dict[str, Any]:
    """Run ``trials`` comparisons; stop at the first failing trial and describe its first bad output."""
    from tritonsmith.tools._worker import call_candidate, call_reference, float64_reference

    trials = int(job.spec["trials"])
    policy = job.spec["tolerance"]
    max_abs = max_rel = 0.0
    for t in range(trials):
        job.stage(f"trial {t + 1}/{trials}")
        seed = int(job.spec["seed"]) + 1000 * (t + 1)
        ref_inputs = make_inputs(seed)
        cand_inputs = [_clone(x) for x in ref_inputs]
        ref_out = flatten_outputs(call_reference(job, ref_model, ref_inputs))
        ref64 = float64_reference(ref_model, make_inputs(seed)) if policy == "numerics" else None
        cand_out = flatten_outputs(call_candidate(job, cand_model, cand_inputs, f"trial {t + 1}"))
        mismatch, a, r = _check_outputs(t, cand_out, ref_out, ref64, policy)
        max_abs, max_rel = max(max_abs, a), max(max_rel, r)
        if mismatch:
            return {"trials": trials, "passed": t, "tolerance": policy, "max_abs_error": max_abs,
                    "max_rel_error": max_rel, "mismatch": mismatch}
    return {"trials": trials, "passed": trials, "tolerance": policy, "max_abs_error": max_abs, "max_rel_error": max_rel}


def _check_outputs(trial: int, cand: list[Any], ref: list[Any], ref64: list[Any] | None,
                   policy: str) -> tuple[dict[str, Any] | None, float, float]:
    import torch

    if len(cand) != len(ref):
        return _mismatch(trial, 0, f"ModelNew returned {len(cand)} outputs, Model returns {len(ref)}"), 0.0, 0.0
    max_abs = max_rel = 0.0
    for i, (c, r) in enumerate(zip(cand, ref, strict=True)):
        if not isinstance(r, torch.Tensor):
            if c != r:
                return _mismatch(trial, i, f"output {i}: expected {r!r}, got {c!r}"), max_abs, max_rel
            continue
        problem = _structural_problem(i, c, r)
        if problem:
            return _mismatch(trial, i, problem), max_abs, max_rel
        verdict = compare(c, r, policy=policy, ref64=ref64[i] if ref64 else None)
        max_abs, max_rel = max(max_abs, verdict.max_abs_error), max(max_rel, verdict.max_rel_error)
        if not verdict.ok:
            d = verdict.details
            message = d.pop("message", None) or (
                f"output {i}: {d['mismatched']} of {d['total']} elements outside tolerance "
                f"(max abs error {verdict.max_abs_error:.3g}, max rel error {verdict.max_rel_error:.3g})")
            keep = {k: d[k] for k in ("mismatched", "total", "nan_count", "inf_count", "first_bad_index",
                                       "candidate_value", "reference_value") if k in d}
            return _mismatch(trial, i, message, max_abs_error=verdict.max_abs_error,
                             max_rel_error=verdict.max_rel_error, **keep), max_abs, max_rel
    return None, max_abs, max_rel


def _structural_problem(i: int, c: Any, r: Any) -> str | None:
    import torch

    if not isinstance(c, torch.Tensor):
        return f"output {i}: expected a tensor, got {type(c).__name__}"
    if tuple(c.shape) != tuple(r.shape):
        return f"output {i}: shape {tuple(c.shape)} but the reference has {tuple(r.shape)}"
    if c.dtype != r.dtype:
        return f"output {i}: dtype {c.dtype} but the reference has {r.dtype}"
    if c.device != r.device:
        return f"output {i}: on {c.device} but the reference is on {r.device}"
    return None


def _mismatch(trial: int, index: int, message: str, **fields: Any) -> dict[str, Any]:
    if "first_bad_index" in fields and fields["first_bad_index"] is not None:
        fields["first_bad_index"] = list(fields["first_bad_index"])
    return {"trial": trial + 1, "output_index": index, "message": f"trial {trial + 1}: {message}", **fields}


def _clone(x: Any) -> Any:
    import torch

    return x.clone() if isinstance(x, torch.Tensor) else x
