"""Problems: the PyTorch reference a kernel must reproduce.

The canonical form is KernelBench's: a Python source defining ``class Model(nn.Module)``,
``get_inputs()`` and ``get_init_inputs()``. Every other way in (an ``nn.Module`` with example inputs,
a plain function) is turned into such a source, so the worker process can import it from a file and
the user can read exactly what was evaluated.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonsmith.core import problem_meta
from tritonsmith.core._problem_codegen import function_source, module_source
from tritonsmith.core._problem_types import ProblemError, ProblemInfo, TensorSpec

__all__ = ["Problem", "ProblemError", "ProblemInfo", "TensorSpec", "load_problem"]

_INSPECT_CACHE: dict[tuple[str, str], ProblemInfo] = {}
_REQUIRED = {"Model": ast.ClassDef, "get_inputs": ast.FunctionDef, "get_init_inputs": ast.FunctionDef}


@dataclass(frozen=True, kw_only=True)
class Problem:
    """A reference PyTorch computation in KernelBench format.

    Build one with :meth:`from_file`, :meth:`from_source`, :meth:`from_module` or
    :meth:`from_function` (or :func:`load_problem`, which picks). ``scaling`` is set when shapes were
    scaled down (see :meth:`scaled`): results computed on such a problem say so.
    """

    source: str
    name: str
    path: Path | None = None
    level: int | None = None
    weights_path: Path | None = None
    scaling: dict[str, tuple[int, int]] | None = field(default=None)

    def __post_init__(self) -> None:
        validate_source(self.source, origin=str(self.path or self.name))

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path) -> Problem:
        """Load a KernelBench-format file (``Model``, ``get_inputs``, ``get_init_inputs``)."""
        p = Path(path)
        if not p.is_file():
            raise ProblemError(f"problem file not found: {p}")
        return cls(source=p.read_text(), name=_name_from_path(p), path=p.resolve(), level=_level_from_path(p))

    @classmethod
    def from_source(cls, source: str, *, name: str = "problem", level: int | None = None) -> Problem:
        """Use KernelBench-format source text."""
        return cls(source=source, name=name, level=level)

    @classmethod
    def from_module(
        cls,
        module: Any,
        inputs: Sequence[Any] | Callable[[], Sequence[Any]],
        *,
        init_inputs: Sequence[Any] = (),
        name: str | None = None,
        weights_dir: str | Path | None = None,
    ) -> Problem:
        """Wrap an ``nn.Module`` class or instance with example inputs (tensors) or an input factory.

        For an instance, its current weights are saved next to the generated source and loaded into
        both the reference and the candidate (matching parameter names), so trained weights are kept.
        """
        source, weights = module_source(module, inputs, init_inputs, weights_dir)
        cls_name = module.__name__ if isinstance(module, type) else type(module).__name__
        return cls(source=source, name=name or _snake(cls_name), weights_path=weights)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        inputs: Sequence[Any] | Callable[[], Sequence[Any]],
        *,
        name: str | None = None,
    ) -> Problem:
        """Wrap a plain function (a functional op like ``torch.nn.functional.gelu``, a ``def``, or a
        one-line ``lambda``) with example inputs or an input factory."""
        source = function_source(fn, inputs)
        return cls(source=source, name=name or _snake(getattr(fn, "__name__", "function")))

    # -- views ----------------------------------------------------------------------------------
    def inspect(self) -> ProblemInfo:
        """Shapes, dtypes, parameters, FLOPs and the op sequence, traced on the ``meta`` device."""
        key = (self.name, self.source)
        info = _INSPECT_CACHE.pop(key, None) or problem_meta.inspect_problem(self)
        _INSPECT_CACHE[key] = info  # most recent last: a small LRU (tracing an RNN on meta takes 20 s)
        while len(_INSPECT_CACHE) > 64:
            _INSPECT_CACHE.pop(next(iter(_INSPECT_CACHE)))
        return info

    def scaled(self, *, max_elements: int = 1 << 16, max_flops: int = 1 << 26) -> Problem:
        """A copy with its module-level size constants halved until inputs, parameters and outputs
        hold at most ``max_elements`` elements each and the forward needs at most ``max_flops``.

        This changes the problem: the returned problem records ``scaling`` (name -> (old, new)) and
        every result computed on it reports the change. Raises :class:`ProblemError` if no scaling of
        the constants keeps the problem valid.
        """
        return problem_meta.scale_problem(self, max_elements=max_elements, max_flops=max_flops)

    def with_source(self, source: str, scaling: dict[str, tuple[int, int]] | None) -> Problem:
        return dataclasses.replace(self, source=source, scaling=scaling)

    @property
    def scaling_note(self) -> str | None:
        if not self.scaling:
            return None
        parts = ", ".join(f"{k} {a}->{b}" for k, (a, b) in self.scaling.items())
        return f"shapes scaled down from the original problem ({parts})"


def load_problem(problem: Problem | str | Path) -> Problem:
    """Accept a :class:`Problem`, a path to a KernelBench-format file, or its source text."""
    if isinstance(problem, Problem):
        return problem
    if isinstance(problem, Path):
        return Problem.from_file(problem)
    if isinstance(problem, str):
        if "\n" not in problem and (problem.endswith(".py") or Path(problem).exists()):
            return Problem.from_file(problem)
        return Problem.from_source(problem)
    raise ProblemError(f"cannot make a problem from {type(problem).__name__}; pass a path, source or Problem")


def validate_source(source: str, *, origin: str) -> None:
    """Check, without running it, that ``source`` defines ``Model``, ``get_inputs`` and ``get_init_inputs``."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ProblemError(f"{origin}: the reference does not parse: {exc.msg} (line {exc.lineno})") from None
    defined: dict[str, type] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            defined[node.name] = type(node)
        elif isinstance(node, (ast.Assign, ast.ImportFrom, ast.Import)):
            for name in _bound_names(node):
                defined.setdefault(name, type(node))
    missing = [n for n in _REQUIRED if n not in defined]
    if missing:
        raise ProblemError(
            f"{origin}: a KernelBench problem must define {', '.join(_REQUIRED)}; missing: {', '.join(missing)}. "
            "Model is the nn.Module to reproduce, get_inputs() returns its forward inputs, "
            "get_init_inputs() its constructor arguments."
        )


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return []


def _name_from_path(p: Path) -> str:
    return p.stem


def _level_from_path(p: Path) -> int | None:
    m = re.search(r"level[_-]?(\d+)", str(p.parent.name))
    return int(m.group(1)) if m else None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() or "problem"
