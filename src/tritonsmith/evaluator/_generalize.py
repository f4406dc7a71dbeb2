"""Does a verified candidate survive new shapes? The evaluator's ``generalize`` option.

Users drop kernels into models that see other batch sizes, and agent-written kernels often break on
configurations they were not written for. After a ``correct`` verdict, the candidate is evaluated again
(correctness only, no timing) on the reference's inputs with their leading (batch-like) dimension changed:
halved, and an odd size. Every tensor input whose first dimension equals the first tensor input's is
resized; where the reference rejects that (a square operand whose first dimension is contracted, ``A @ B``
with M == K: the scaled-down problems often have it), only the first tensor input is. Fresh inputs come from
the reference's own ``get_inputs()`` (concatenated and cut), so their distribution is the reference's. The
verdict, ``result.generalizes``:

- ``yes``: correct at every tried size;
- ``no``: some size failed (``result.generalize_note`` says which and how);
- ``n/a``: the reference itself does not accept another leading size (or has no batched tensor input),
  so there is nothing a kernel could be asked to survive.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from tritonsmith.core.problem import Problem, ProblemError
from tritonsmith.core.results import EvalResult

__all__ = ["check_generalization", "leading_sizes", "resized_problem"]

log = logging.getLogger(__name__)

_RESIZE = '''

# --- added by tritonsmith's generalization check: the leading dimension resized to {size} ---
_tritonsmith_original_get_inputs = get_inputs


def get_inputs():
    import torch

    first = _tritonsmith_original_get_inputs()
    lead = next(v.shape[0] for v in first if isinstance(v, torch.Tensor) and v.dim() > 0)
    draws = [first]
    while len(draws) * lead < {size}:
        draws.append(_tritonsmith_original_get_inputs())
    out, resized = [], False
    for i, v in enumerate(first):
        if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == lead and not (resized and {first_only}):
            v = torch.cat([d[i] for d in draws])[:{size}].clone()
            resized = True
        out.append(v)
    return out
'''


def leading_sizes(lead: int) -> tuple[int, ...]:
    """The leading sizes tried instead of ``lead``: half of it, and an odd size (both differ from ``lead``)."""
    half = lead // 2 if lead >= 2 else 2
    odd = lead - 1 if lead % 2 == 0 else lead - 2
    if odd < 1 or odd == half:
        odd = lead + 1 if lead % 2 == 0 else lead + 2
    return tuple(sorted({half, odd} - {lead}))


def resized_problem(problem: Problem, size: int, *, first_only: bool = False) -> Problem:
    """``problem`` whose ``get_inputs()`` returns its inputs with the leading dimension resized to ``size``:
    every tensor input sharing the first one's leading size, or with ``first_only`` the first tensor input."""
    return problem.with_source(problem.source + _RESIZE.format(size=int(size), first_only=bool(first_only)),
                               problem.scaling)


def _leading_dim(problem: Problem) -> int | None:
    """The first dimension of the reference's first batched tensor input (on the meta device: no data)."""
    import torch

    from tritonsmith.core.problem_meta import exec_reference, reference_inputs

    module = exec_reference(problem.source, problem.name)
    values = reference_inputs(module, problem.name, "meta")
    return next((int(v.shape[0]) for v in values if isinstance(v, torch.Tensor) and v.dim() > 0), None)


def check_generalization(result: EvalResult, problem: Problem, source: str,
                         evaluate_fn: Callable[..., EvalResult], **options: Any) -> EvalResult:
    """``result`` with ``generalizes`` and ``generalize_note`` set, from evaluating ``source`` again
    (correctness only) on ``problem`` with its leading dimension changed. ``options`` go to ``evaluate_fn``."""
    try:
        lead = _leading_dim(problem)
    except ProblemError as exc:
        return dataclasses.replace(result, generalizes="n/a", generalize_note=f"inputs not inspectable: {exc}")
    if lead is None:
        return dataclasses.replace(result, generalizes="n/a", generalize_note="no batched tensor input")
    failures, accepted, alone = [], [], False
    for size in leading_sizes(lead):
        tried = _evaluate_resized(problem, size, source, evaluate_fn, options)
        if tried is None:  # the reference itself rejects this size: nothing to survive
            continue
        other, first_only = tried
        alone = alone or first_only
        accepted.append(size)
        if not other.ok:
            failures.append(f"leading size {size} (instead of {lead}): {other.status.value}: {other.message}"
                            + (f" ({other.error.splitlines()[0]})" if other.error else ""))
    if not accepted:
        return dataclasses.replace(result, generalizes="n/a", generalize_note=(
            f"the reference does not accept leading sizes {', '.join(map(str, leading_sizes(lead)))} (it has {lead})"))
    if failures:
        return dataclasses.replace(result, generalizes="no", generalize_note="; ".join(failures)[:1500])
    return dataclasses.replace(result, generalizes="yes", generalize_note=(
        f"correct with leading size {', '.join(map(str, accepted))} instead of {lead}"
        + (" (the first input resized alone: the reference rejects the others resized with it)" if alone else "")))


def _evaluate_resized(problem: Problem, size: int, source: str, evaluate_fn: Callable[..., EvalResult],
                      options: dict[str, Any]) -> tuple[EvalResult, bool] | None:
    """``source`` evaluated (correctness only) with every batched input at leading size ``size``, or, where the
    reference rejects that, with the first tensor input alone resized (then the flag is True); None when the
    reference rejects both."""
    for first_only in (False, True):
        try:
            return evaluate_fn(resized_problem(problem, size, first_only=first_only), source, benchmark=False,
                               **options), first_only
        except ProblemError as exc:
            log.info("generalize: the reference of %s rejects leading size %d%s: %s", problem.name, size,
                     " (first input only)" if first_only else "", exc)
    return None
