"""Import Python source from real files (Triton's JIT needs kernel source on disk)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def source_digest(source: str) -> str:
    """A short, stable content hash used in file and module names."""
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def write_source(directory: Path, stem: str, source: str) -> Path:
    """Write ``source`` to ``directory/stem_<digest>.py`` and return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}_{source_digest(source)}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source)
        tmp.replace(path)
    return path


def import_file(path: Path, module_name: str | None = None) -> ModuleType:
    """Import the file at ``path`` as a fresh module and register it in ``sys.modules``.

    Registration matters: Triton and ``inspect`` look kernels up through their module.
    Exceptions raised by the module body propagate unchanged.
    """
    name = module_name or f"_tritonsmith_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
