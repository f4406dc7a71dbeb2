"""Old public names kept for a while: each still works and says, once per call site, what replaces it."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["deprecated_alias", "warn_deprecated"]

F = TypeVar("F", bound=Callable[..., Any])


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """A :class:`DeprecationWarning` naming the old spelling and its replacement."""
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=stacklevel)


def deprecated_alias(old: str, new: F, new_name: str | None = None) -> F:
    """``new`` under its old name ``old``: the same call, with a :class:`DeprecationWarning` first."""
    replacement = new_name or getattr(new, "__name__", repr(new))

    @functools.wraps(new)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warn_deprecated(old, replacement)
        return new(*args, **kwargs)

    alias.__name__ = old
    alias.__doc__ = f"Deprecated: use :func:`{replacement}` (same arguments)."
    return alias  # type: ignore[return-value]
