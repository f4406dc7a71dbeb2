"""The bottom layer: the types and facts every other package shares. It imports nothing of tritonsmith
above it (and nothing heavy: torch loads only inside the functions that need it).

- ``problem``: :class:`Problem`, :func:`load_problem`, :class:`ProblemError` (KernelBench format);
  ``problem_meta`` runs a reference on the ``meta`` device (shapes, FLOPs, ops) and builds its inputs.
- ``results``: :class:`EvalResult`, :class:`EvalStatus` and their parts; :class:`Attempt`.
- ``settings``: :class:`KernelContext` (one layer of settings) and :class:`Settings` (resolved:
  argument > run context > environment > default).
- ``device``: :func:`resolve_device` and the one default, :data:`DEFAULT_DEVICE`.
- ``modload``, ``paths``, ``version``: source files on disk, the cache directory, the code version.
"""

from tritonsmith.core.device import DEFAULT_DEVICE, resolve_device
from tritonsmith.core.problem import Problem, ProblemError, ProblemInfo, TensorSpec, load_problem
from tritonsmith.core.results import Attempt, EvalResult, EvalStatus
from tritonsmith.core.settings import KernelContext, Settings

__all__ = [
    "DEFAULT_DEVICE",
    "Attempt",
    "EvalResult",
    "EvalStatus",
    "KernelContext",
    "Problem",
    "ProblemError",
    "ProblemInfo",
    "Settings",
    "TensorSpec",
    "load_problem",
    "resolve_device",
]
