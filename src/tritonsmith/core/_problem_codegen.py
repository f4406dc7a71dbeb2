"""Turn an ``nn.Module`` or a plain function plus inputs into KernelBench-format source."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tritonsmith.core._problem_types import ProblemError

_HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def module_source(
    module: Any,
    inputs: Sequence[Any] | Callable[[], Sequence[Any]],
    init_inputs: Sequence[Any],
    weights_dir: str | Path | None,
) -> tuple[str, Path | None]:
    """Source for ``module`` (class or instance) and, for an instance, the path of its saved weights."""
    import torch
    from torch import nn

    cls = module if isinstance(module, type) else type(module)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ProblemError(f"from_module needs an nn.Module class or instance, got {type(module).__name__}")
    parts = [_HEADER, _object_source(cls, "Model"), _init_inputs_source(init_inputs), _inputs_source(inputs)]
    weights = None
    if not isinstance(module, type):
        directory = Path(weights_dir) if weights_dir else Path(tempfile.mkdtemp(prefix="tritonsmith-weights-"))
        directory.mkdir(parents=True, exist_ok=True)
        weights = directory / f"{cls.__name__}.pt"
        torch.save({k: v.detach().cpu() for k, v in module.state_dict().items()}, weights)
    return "\n\n".join(p for p in parts if p) + "\n", weights


def function_source(fn: Callable[..., Any], inputs: Sequence[Any] | Callable[[], Sequence[Any]]) -> str:
    """Source wrapping ``fn`` in a parameter-free ``Model`` whose forward calls it."""
    if not callable(fn):
        raise ProblemError(f"from_function needs a callable, got {type(fn).__name__}")
    model = (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n\n"
        "    def forward(self, *args):\n"
        "        return _reference_fn(*args)\n"
    )
    parts = [_HEADER, _object_source(fn, "_reference_fn"), model, "def get_init_inputs():\n    return []\n",
             _inputs_source(inputs)]
    return "\n\n".join(parts) + "\n"


def _object_source(obj: Any, alias: str) -> str:
    """Code that binds ``alias`` to ``obj``: an import when it is importable, else its own source."""
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", getattr(obj, "__name__", ""))
    if module_name and module_name != "__main__" and "<" not in qualname and _importable(module_name, qualname, obj):
        head, _, tail = qualname.partition(".")
        bind = f"from {module_name} import {head} as {alias}" if not tail else (
            f"from {module_name} import {head} as _owner\n{alias} = _owner.{tail}")
        return bind
    if getattr(obj, "__name__", None) == "<lambda>":
        return f"{alias} = {_lambda_source(obj)}"
    try:
        code = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError) as exc:
        raise ProblemError(
            f"cannot recover the source of {qualname or obj!r} ({exc}); define it in a module file or pass "
            "KernelBench-format source with Problem.from_source"
        ) from None
    imports = _module_imports(obj)
    return f"{imports}{code}\n{alias} = {obj.__name__}\n" if obj.__name__ != alias else f"{imports}{code}"


def _importable(module_name: str, qualname: str, obj: Any) -> bool:
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return False
    return target is obj


def _module_imports(obj: Any) -> str:
    """The defining module's top-level import statements, so copied source still resolves names."""
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    try:
        tree = ast.parse(inspect.getsource(module)) if module else None
    except (OSError, TypeError):
        tree = None
    if tree is None:
        return ""
    lines = [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(lines) + "\n\n" if lines else ""


def _lambda_source(fn: Callable[..., Any]) -> str:
    try:
        line = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        line = ""
    lambdas: list[ast.Lambda] = []
    for candidate in (line, line.strip().rstrip(",")):
        try:
            tree = ast.parse(candidate)
        except SyntaxError:
            continue
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        break
    if len(lambdas) != 1:
        raise ProblemError("cannot recover this lambda's source; use a def or pass KernelBench source")
    return ast.unparse(lambdas[0])


def _init_inputs_source(init_inputs: Sequence[Any]) -> str:
    for value in init_inputs:
        if not isinstance(value, (int, float, bool, str, tuple, list, type(None))):
            raise ProblemError(f"init inputs must be plain Python values (ints, floats, tuples), got {type(value).__name__}")
    return f"def get_init_inputs():\n    return {list(init_inputs)!r}\n"


def _inputs_source(inputs: Sequence[Any] | Callable[[], Sequence[Any]]) -> str:
    """``get_inputs`` that draws fresh random tensors shaped like the examples (or calls the factory)."""
    import torch

    if callable(inputs):
        return _object_source(inputs, "get_inputs")
    lines = ["def get_inputs():", "    return ["]
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise ProblemError(f"example input {i} is a {type(x).__name__}; inputs must be tensors")
        lines.append(f"        {_random_like(x)},")
    lines.append("    ]")
    return "\n".join(lines) + "\n"


def _random_like(x: Any) -> str:
    import torch

    shape = tuple(x.shape)
    dtype = str(x.dtype)
    if x.dtype == torch.bool:
        return f"torch.rand({shape}) < 0.5"
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return f"torch.randn({shape}, dtype={dtype})"
    lo = int(x.min()) if x.numel() else 0
    hi = int(x.max()) + 1 if x.numel() else 2
    return f"torch.randint({lo}, {max(hi, lo + 1)}, {shape}, dtype={dtype})"
