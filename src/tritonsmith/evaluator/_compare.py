"""Tolerance policies: is a candidate's output the reference's, within what the dtype allows?

``kernelbench``: elementwise ``allclose`` with atol = rtol = 1e-4 for fp32 and 1e-2 for fp16/bf16, as
KernelBench checks today.

``numerics``: both outputs are compared with a float64 evaluation of the reference. The candidate passes
when its normwise error is no worse than ``_ERROR_MULTIPLE`` times the reference's own error (or under a
floor at the dtype's rounding level) and it meets a loose elementwise bound. This accepts a kernel that
sums in another order (often more accurate than cuBLAS) while still refusing real bugs.
"""

from __future__ import annotations

import math
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
    """Compare one candidate tensor with the reference under ``policy``; shapes already match.

    Chunked: a chunk of ``_CHUNK`` elements at a time, so no temporary is as large as the output (a conv output
    of 2^31 floats is 8.6 GB, and the trials hold several such tensors already).
    """
    import torch

    if ref.is_floating_point() and policy == "numerics" and ref64 is None:
        raise ValueError("the numerics policy needs a float64 reference")
    acc = _Scan(out, ref, policy=policy, ref64=ref64)
    acc.run()
    ok = acc.mismatched == 0
    details: dict[str, Any] = {"mismatched": acc.mismatched, "total": ref.numel(), "nan_count": acc.nan_count,
                               "inf_count": acc.inf_count}
    if acc.numerics:  # normwise errors against float64
        norm = math.sqrt(acc.exact_sq) or 1.0
        cand_err, ref_err = math.sqrt(acc.cand_sq) / norm, math.sqrt(acc.ref_sq) / norm
        bound = max(_ERROR_MULTIPLE * ref_err, _rounding_floor(ref.dtype))
        ok = ok and cand_err <= bound and not acc.nan_where_exact_finite
        details.update(candidate_rel_error=cand_err, reference_rel_error=ref_err, allowed_rel_error=bound)
        if not ok and acc.mismatched == 0:
            details["message"] = (f"normwise error {cand_err:.2e} vs float64 exceeds {bound:.2e} "
                                  f"({_ERROR_MULTIPLE:g}x the reference's own {ref_err:.2e})")
    if acc.first_bad is not None:
        flat = acc.first_bad
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), ref.shape)) if ref.dim() else ()
        details.update(first_bad_index=index, candidate_value=float(out.reshape(-1)[flat]),
                       reference_value=float(acc.target.reshape(-1)[flat]))
        if out.is_floating_point():
            details["pattern"] = mismatch_pattern(out, acc.target, acc.mask)
    return Verdict(ok=ok, max_abs_error=acc.max_abs, max_rel_error=acc.max_rel, details=details)


class _Scan:
    """One pass over (candidate, target) a chunk at a time: the target is the reference (``kernelbench``, and
    any non-float output: exact equality) or the float64 answer rounded to the output's dtype (``numerics``)."""

    def __init__(self, out: Any, ref: Any, *, policy: str, ref64: Any | None) -> None:
        self.out, self.ref = out, ref
        self.floating = bool(ref.is_floating_point())
        self.numerics = self.floating and policy == "numerics"
        self.target = ref64 if self.numerics else ref
        self.tol = (loose_tolerance if self.numerics else kernelbench_tolerance)(ref.dtype) if self.floating else 0.0
        self.mismatched = self.nan_count = self.inf_count = 0
        self.max_abs = self.max_rel = -1.0
        self.first_bad: int | None = None
        self.mask: Any = None
        self.any_finite = False
        self.exact_sq = self.cand_sq = self.ref_sq = 0.0  # numerics only
        self.nan_where_exact_finite = False

    def run(self) -> None:
        flat_o, flat_r, flat_t = self.out.reshape(-1), self.ref.reshape(-1), self.target.reshape(-1)
        for lo in range(0, flat_r.numel(), _CHUNK):
            self._chunk(lo, flat_o[lo:lo + _CHUNK], flat_r[lo:lo + _CHUNK], flat_t[lo:lo + _CHUNK])
        if not self.any_finite:
            self.max_abs = self.max_rel = float("nan")

    def _chunk(self, lo: int, o: Any, r: Any, t: Any) -> None:
        import torch

        if not self.floating:
            bad = o.to(r.dtype) != r
            diff = bad.float()
            rel = diff / r.float().abs().clamp_min(1e-12)
        else:
            o_f = _wide(o)
            t_f = t.to(o_f.dtype) if self.numerics else _wide(r)
            bad = ~torch.isclose(o_f, t_f, atol=self.tol, rtol=self.tol, equal_nan=True)
            diff = (o_f - t_f).abs()
            rel = diff / t_f.abs().clamp_min(1e-12)
            self.nan_count += int(torch.isnan(o).sum())
            self.inf_count += int(torch.isinf(o).sum())
            if self.numerics:
                self._norms(o_f, r, t)
        self._stats(lo, bad, diff, rel)

    def _norms(self, o_f: Any, r: Any, t: Any) -> None:
        import torch

        e = t.double()
        self.exact_sq += float(e.square().sum())
        self.cand_sq += float((o_f.double() - e).square().sum())
        self.ref_sq += float((_wide(r).double() - e).square().sum())
        self.nan_where_exact_finite |= bool(torch.isnan(o_f).any() & ~torch.isnan(e).any())

    def _stats(self, lo: int, bad: Any, diff: Any, rel: Any) -> None:
        import torch

        finite = torch.isfinite(diff)
        if bool(finite.any()):
            self.any_finite = True
            # torch.where, not diff[finite]: boolean indexing builds an int64 index as large as the chunk
            self.max_abs = max(self.max_abs, float(torch.where(finite, diff, -1.0).max()))
            self.max_rel = max(self.max_rel, float(torch.where(finite, rel, -1.0).max()))
        n = int(bad.sum())
        if n and self.first_bad is None:
            self.first_bad = lo + int(bad.nonzero()[0])
            # the full mask (one byte per element) only once there is a mismatch to describe; filled from this
            # pass, so the pattern describes what was judged even if the values change afterwards
            self.mask = torch.zeros(self.ref.shape, dtype=torch.bool, device=self.ref.device)
        if self.mask is not None:
            self.mask.view(-1)[lo:lo + bad.numel()] = bad
        self.mismatched += n


def _wide(x: Any) -> Any:
    """float32 for comparisons (float64 copies of multi-GB outputs exhaust GPU memory); float64 stays."""
    import torch

    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def mismatch_pattern(out: Any, ref: Any, bad: Any) -> dict[str, Any]:
    """What the wrong values look like, for a model to act on (JSON-able).

    ``zero``/``nan``/``inf``: shares of the mismatched elements where the candidate is 0 / NaN / +-inf;
    ``constant``: the candidate's value when it is the same at every mismatch; ``ref_finite_where_inf``: the
    reference is finite where the candidate is not (an overflow); ``rows``/``cols``: over the output seen as
    (rows, last dim), how many rows and which columns hold mismatches; ``ref_abs_max``: the reference's
    magnitude; ``mean_ratio``: mean(candidate / reference) over the mismatches (a constant factor off).
    Chunked, as :func:`compare`.
    """
    s = _PatternScan(out, ref, bad)
    n = max(s.n, 1)  # the mask holds at least the mismatch it was built for
    pattern: dict[str, Any] = {"mismatched": s.n, "zero": s.zero / n, "nan": s.nan / n, "inf": s.inf / n,
                               "ref_finite_where_inf": s.ref_finite_where_inf, "ref_abs_max": s.ref_abs_max}
    if s.n > 1 and s.finite == s.n and s.constant is not None:
        pattern["constant"] = s.constant
    if s.ratio_count:
        pattern["mean_ratio"] = s.ratio_sum / s.ratio_count
    if bad.dim() >= 2:
        grid = bad.reshape(-1, bad.shape[-1])
        rows, cols = grid.any(dim=1), grid.any(dim=0)
        bad_cols = cols.nonzero().flatten()
        pattern.update(rows=[int(rows.sum()), int(rows.numel())], cols=[int(cols.sum()), int(cols.numel())],
                       first_col=int(bad_cols[0]), last_col=int(bad_cols[-1]),
                       full_rows=int((grid.sum(dim=1) == grid.shape[1]).sum()))
    return pattern


class _PatternScan:
    """Counts over the mismatched elements of (out, ref), a chunk at a time (see :func:`mismatch_pattern`)."""

    def __init__(self, out: Any, ref: Any, bad: Any) -> None:
        self.n = self.zero = self.nan = self.inf = self.ref_finite_where_inf = self.finite = self.ratio_count = 0
        self.ratio_sum = self.ref_abs_max = 0.0
        self.constant: float | None = None
        self._same = True
        flat_o, flat_r, flat_b = out.reshape(-1), ref.reshape(-1), bad.reshape(-1)
        for lo in range(0, flat_b.numel(), _CHUNK):
            r_all = flat_r[lo:lo + _CHUNK]
            self.ref_abs_max = max(self.ref_abs_max, float(r_all.double().abs().max()) if r_all.numel() else 0.0)
            b = flat_b[lo:lo + _CHUNK]
            if bool(b.any()):
                self._add(flat_o[lo:lo + _CHUNK][b].double(), r_all[b].double())
        if not self._same:
            self.constant = None

    def _add(self, o: Any, r: Any) -> None:
        import torch

        nonfinite = ~torch.isfinite(o)
        self.n += o.numel()
        self.zero += int((o == 0).sum())
        self.nan += int(torch.isnan(o).sum())
        self.inf += int(torch.isinf(o).sum())
        self.ref_finite_where_inf += int((nonfinite & torch.isfinite(r)).sum())
        finite = o[~nonfinite]
        self.finite += finite.numel()
        if finite.numel():
            if self.constant is None and self._same:
                self.constant = float(finite[0])
            self._same = self._same and bool((finite == self.constant).all())
        ratio_ok = torch.isfinite(o) & (r.abs() > 1e-6)
        self.ratio_count += int(ratio_ok.sum())
        self.ratio_sum += float((o[ratio_ok] / r[ratio_ok]).sum())


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
