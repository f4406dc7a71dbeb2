"""Tolerance policies: is a candidate's output the reference's, within what the dtype allows?

``kernelbench``: elementwise ``allclose`` with atol = rtol = 1e-4 for fp32 and 1e-2 for fp16/bf16, as
KernelBench checks today.

``numerics``: both outputs are compared with a float64 evaluation of the reference. The candidate passes
when its normwise error is no worse than ``_ERROR_MULTIPLE`` times the reference's own error (or under a
floor at the dtype's rounding level) and it meets a loose elementwise bound. This accepts a kernel that
sums in another order (often more accurate than cuBLAS) while still refusing real bugs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TOLERANCES = ("kernelbench", "numerics")
_ERROR_MULTIPLE = 4.0


@dataclass(frozen=True, kw_only=True)
class Verdict:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    details: dict[str, Any]


_CHUNK = 1 << 24  # elements per float64 chunk: no float64 copies of multi-GB outputs


def relative_error(c: Any, r: Any, chunk: int = _CHUNK) -> float:
    """||c - r|| / ||r|| in float64, a chunk at a time (``||r|| = 0`` counts as 1).

    NaN where either holds NaN; a dtype, device or shape mismatch is ``inf``.
    """
    import torch

    if c.dtype != r.dtype or c.device != r.device or c.shape != r.shape:
        return float("inf")
    flat_c, flat_r = c.reshape(-1), r.reshape(-1)
    diff_sq = torch.zeros((), dtype=torch.float64, device=r.device)
    ref_sq = torch.zeros((), dtype=torch.float64, device=r.device)
    for lo in range(0, flat_r.numel(), chunk):
        rc = flat_r[lo:lo + chunk].double()
        cc = flat_c[lo:lo + chunk].double()
        diff_sq += (cc - rc).square().sum()
        ref_sq += rc.square().sum()
    return float(diff_sq.sqrt()) / (float(ref_sq.sqrt()) or 1.0)


def kernelbench_tolerance(dtype: Any) -> float:
    import torch

    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


def loose_tolerance(dtype: Any) -> float:
    import torch

    return 5e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-2


def _rounding_floor(dtype: Any) -> float:
    import torch

    return {torch.float16: 1e-3, torch.bfloat16: 8e-3}.get(dtype, 2e-6)


def compare(out: Any, ref: Any, *, policy: str, ref64: Any | None = None) -> Verdict:
    """Compare one candidate tensor with the reference under ``policy``; shapes already match."""
    import torch

    if not torch.is_floating_point(ref):
        equal = out.to(ref.dtype) == ref
        return _verdict(bool(equal.all()), out, ref, ~equal)
    out_f, ref_f = _wide(out), _wide(ref)
    if policy == "kernelbench":
        tol = kernelbench_tolerance(ref.dtype)
        bad = ~torch.isclose(out_f, ref_f, atol=tol, rtol=tol, equal_nan=True)
        return _verdict(not bool(bad.any()), out_f, ref_f, bad)
    if ref64 is None:
        raise ValueError("the numerics policy needs a float64 reference")
    exact = ref64.double()
    tol = loose_tolerance(ref.dtype)
    # isclose wants one dtype: the float64 answer rounded to the output's (0.5 ulp, far inside ``tol``)
    bad = ~torch.isclose(out_f, exact.to(out_f.dtype), atol=tol, rtol=tol, equal_nan=True)
    norm = float(exact.norm()) or 1.0
    cand_err = float((out_f - exact).norm()) / norm
    ref_err = float((ref_f - exact).norm()) / norm
    bound = max(_ERROR_MULTIPLE * ref_err, _rounding_floor(ref.dtype))
    ok = not bool(bad.any()) and cand_err <= bound and not bool(torch.isnan(out_f).any() & ~torch.isnan(exact).any())
    verdict = _verdict(ok, out_f, exact, bad)
    verdict.details.update(candidate_rel_error=cand_err, reference_rel_error=ref_err, allowed_rel_error=bound)
    if not ok and not bool(bad.any()):
        verdict.details["message"] = (
            f"normwise error {cand_err:.2e} vs float64 exceeds {bound:.2e} "
            f"({_ERROR_MULTIPLE:g}x the reference's own {ref_err:.2e})")
    return verdict


def _wide(x: Any) -> Any:
    """float32 for comparisons (float64 copies of multi-GB outputs exhaust GPU memory); float64 stays."""
    import torch

    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _verdict(ok: bool, out: Any, ref: Any, bad: Any) -> Verdict:
    import torch

    diff = (_wide(out) - _wide(ref)).abs() if out.is_floating_point() else (out != ref).float()
    finite = torch.isfinite(diff)
    # torch.where, not diff[finite]: boolean indexing builds an int64 index as large as the output.
    max_abs = float(torch.where(finite, diff, -1.0).max()) if bool(finite.any()) else float("nan")
    rel = diff / _wide(ref).abs().clamp_min(1e-12)
    max_rel = float(torch.where(finite, rel, -1.0).max()) if bool(finite.any()) else float("nan")
    details: dict[str, Any] = {
        "mismatched": int(bad.sum()),
        "total": int(bad.numel()),
        "nan_count": int(torch.isnan(out).sum()) if out.is_floating_point() else 0,
        "inf_count": int(torch.isinf(out).sum()) if out.is_floating_point() else 0,
    }
    if bool(bad.any()):
        flat = int(bad.reshape(-1).nonzero()[0])
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), bad.shape)) if bad.dim() else ()
        details.update(first_bad_index=index, candidate_value=float(out.reshape(-1)[flat]),
                       reference_value=float(ref.reshape(-1)[flat]))
        if out.is_floating_point():
            details["pattern"] = mismatch_pattern(out, ref, bad)
    return Verdict(ok=ok, max_abs_error=max_abs, max_rel_error=max_rel, details=details)


def mismatch_pattern(out: Any, ref: Any, bad: Any) -> dict[str, Any]:
    """What the wrong values look like, for a model to act on (JSON-able).

    ``zero``/``nan``/``inf``: shares of the mismatched elements where the candidate is 0 / NaN / +-inf;
    ``constant``: the candidate's value when it is the same at every mismatch; ``ref_finite_where_inf``: the
    reference is finite where the candidate is not (an overflow); ``rows``/``cols``: over the output seen as
    (rows, last dim), how many rows and which columns hold mismatches; ``ref_abs_max``: the reference's
    magnitude; ``mean_ratio``: mean(candidate / reference) over the mismatches (a constant factor off).
    """
    import torch

    n = int(bad.sum())
    o, r = out[bad].double(), ref[bad].double()
    nonfinite = ~torch.isfinite(o)
    pattern: dict[str, Any] = {
        "mismatched": n, "zero": float((o == 0).sum()) / n, "nan": float(torch.isnan(o).sum()) / n,
        "inf": float(torch.isinf(o).sum()) / n,
        "ref_finite_where_inf": int((nonfinite & torch.isfinite(r)).sum()),
        "ref_abs_max": float(ref.double().abs().max()) if ref.numel() else 0.0,
    }
    finite = o[~nonfinite]
    if n > 1 and finite.numel() == n and bool((finite == finite[0]).all()):
        pattern["constant"] = float(finite[0])
    ratio_ok = torch.isfinite(o) & (r.abs() > 1e-6)
    if bool(ratio_ok.any()):
        pattern["mean_ratio"] = float((o[ratio_ok] / r[ratio_ok]).mean())
    if bad.dim() >= 2:
        grid = bad.reshape(-1, bad.shape[-1])
        rows, cols = grid.any(dim=1), grid.any(dim=0)
        bad_cols = cols.nonzero().flatten()
        pattern.update(rows=[int(rows.sum()), int(rows.numel())], cols=[int(cols.sum()), int(cols.numel())],
                       first_col=int(bad_cols[0]), last_col=int(bad_cols[-1]),
                       full_rows=int((grid.sum(dim=1) == grid.shape[1]).sum()))
    return pattern


def describe_inputs(inputs: list[Any]) -> list[str]:
    """``["x: (37, 129) float32 in [-4.21, 4.05]", ...]``: the tensor inputs' shapes and ranges."""
    import torch

    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.numel():
            lo, hi = (float(x.min()), float(x.max())) if x.dtype != torch.bool else (0.0, 1.0)
            out.append(f"input {i}: {tuple(x.shape)} {str(x.dtype).replace('torch.', '')} in [{lo:.4g}, {hi:.4g}]")
        elif not isinstance(x, torch.Tensor):
            out.append(f"input {i}: {type(x).__name__} {x!r}"[:80])
    return out[:8]
