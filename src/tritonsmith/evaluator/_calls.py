"""Calling the two models inside the worker: the candidate's failures become :class:`CandidateFailure`,
the reference's become :class:`ProblemError` (the user's reference is broken, not the candidate)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tritonsmith.core.problem import ProblemError
from tritonsmith.core.problem_meta import flatten_outputs
from tritonsmith.evaluator._errors import CandidateFailure, describe, is_compile_error

if TYPE_CHECKING:
    from tritonsmith.evaluator.sandbox._worker import Job


def call_candidate(job: Job, model: Any, inputs: list[Any], stage: str, *, sync: bool = True) -> Any:
    """Run the candidate's forward; its failures become CandidateFailure with a readable message.

    ``sync=False`` (timing) leaves the device running: the timer synchronizes after its end event, so the
    candidate is timed exactly like the baselines and work it hides on another stream shows up as host
    time the events did not see.
    """
    import torch

    try:
        with torch.no_grad():
            out = model(*inputs)
        if sync and job.device == "cuda":
            torch.cuda.synchronize()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise CandidateFailure(call_status(exc), stage, f"ModelNew.forward raised {type(exc).__name__}",
                               describe(exc, job.candidate_path)) from exc
    return out


def call_reference(job: Job, model: Any, inputs: list[Any]) -> Any:
    import torch

    try:
        with torch.no_grad():
            return model(*inputs)
    except Exception as exc:
        raise ProblemError(f"{job.spec['problem_name']}: the reference forward raised {type(exc).__name__}: {exc}") from exc


def float64_reference(model: Any, inputs: list[Any]) -> list[Any]:
    """The reference evaluated in float64 (for the ``numerics`` policy)."""
    import torch

    model64 = copy.deepcopy(model).double()
    inputs64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    with torch.no_grad():
        return flatten_outputs(model64(*inputs64))


def call_status(exc: BaseException) -> str:
    return "compile_error" if is_compile_error(exc) else "runtime_error"
