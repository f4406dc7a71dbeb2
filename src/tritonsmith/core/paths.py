"""Where tritonsmith keeps files of its own between runs."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """Per-user cache directory of tritonsmith (``$TRITONSMITH_CACHE_DIR`` overrides it)."""
    if env := os.environ.get("TRITONSMITH_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonsmith"
