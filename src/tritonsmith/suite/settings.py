"""A suite run's settings: one object, resolved once per run and handed down to every task.

    run_suite(problems, "runs/l1", SuiteSettings(generator="builtin", iterations=3, device="cuda"))
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tritonsmith.core.deprecation import warn_deprecated
from tritonsmith.suite.pool import visible_gpus

__all__ = ["EVAL", "OPTIMIZE", "SuiteSettings", "optimize_fn_reference"]

OPTIMIZE = "optimize"
EVAL = "eval"

# run_suite's keyword arguments before SuiteSettings, by the field each one sets
_LEGACY_NAMES = {"timeout_s": "eval_timeout_s"}


@dataclass(frozen=True, kw_only=True)
class SuiteSettings:
    """Everything a suite run is asked to do.

    ``mode``: ``optimize`` runs ``optimize_fn`` (default :func:`tritonsmith.graphs.optimize`) with
    ``generator`` for ``iterations``; ``eval`` scores each problem's given kernel once. ``device``:
    ``auto`` (a GPU when one is visible), ``cuda`` or ``cpu``. ``workers`` / ``slots_per_gpu``: how many
    problems run at once (None: one per GPU slot, or per core on the CPU). ``trials``, ``tolerance``,
    ``policy``, ``scale``, ``eval_timeout_s``: the evaluator's settings. ``time_budget_s`` stops starting
    new problems once spent (those in flight finish). ``use_memory`` lets the loop read and write its
    kernel memory (off by default: workers run in parallel and a suite score should not depend on the
    order problems finished in). ``optimize_fn``: a module-level function or its ``"module:function"``.
    """

    mode: str = OPTIMIZE
    generator: str | None = None
    iterations: int = 3
    device: str = "auto"
    workers: int | None = None
    slots_per_gpu: int = 1
    optimize_fn: str | Callable[..., Any] | None = None
    trials: int = 5
    tolerance: str = "kernelbench"
    policy: str = "hybrid"
    scale: bool = False
    eval_timeout_s: float | None = None
    time_budget_s: float | None = None
    use_memory: bool = False

    def resolved(self) -> SuiteSettings:
        """Checked, with the device resolved (``auto`` -> ``cuda`` or ``cpu``) and the optimize function as an
        import reference (workers in other processes import it by name). Done once per run."""
        if self.mode not in (OPTIMIZE, EVAL):
            raise ValueError(f"mode must be {OPTIMIZE!r} or {EVAL!r}, not {self.mode!r}")
        fn = optimize_fn_reference(self.optimize_fn) if self.mode == OPTIMIZE else None
        return dataclasses.replace(self, device=_resolve_device(self.device), optimize_fn=fn)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able once :meth:`resolved` (a task carries its settings to a worker this way)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SuiteSettings:
        return cls(**data)

    @classmethod
    def from_keywords(cls, base: SuiteSettings | None, legacy: Mapping[str, Any]) -> SuiteSettings:
        """``base`` (default: the defaults) with ``run_suite``'s old keyword arguments applied; each use of
        them warns (:class:`DeprecationWarning`). Unknown names raise :class:`TypeError`."""
        names = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(k for k in legacy if _LEGACY_NAMES.get(k, k) not in names):
            raise TypeError(f"run_suite() got unexpected keyword argument(s): {', '.join(unknown)}")
        fields = {_LEGACY_NAMES.get(k, k): v for k, v in legacy.items()}
        warn_deprecated(f"run_suite({', '.join(f'{k}=' for k in legacy)})",
                        "run_suite(problems, out, SuiteSettings(...))", stacklevel=4)
        return dataclasses.replace(base or cls(), **fields)


def optimize_fn_reference(fn: str | Callable[..., Any] | None) -> str | None:
    """Workers import the optimize function by name: ``"module:qualname"``, checked to resolve back to ``fn``."""
    if fn is None or isinstance(fn, str):
        return fn
    ref = f"{fn.__module__}:{fn.__qualname__}"
    obj: Any = importlib.import_module(fn.__module__)
    try:
        for part in fn.__qualname__.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        obj = None
    if obj is not fn:
        raise ValueError(f"optimize_fn {ref} cannot be imported by name in a worker process; "
                         "pass a module-level function (or its 'module:function' reference)")
    return ref


def _resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if visible_gpus() else "cpu"
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'auto', 'cuda' or 'cpu', not {device!r}")
    return device
