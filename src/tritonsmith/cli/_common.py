"""What every command shares: consoles, paths, the choices of the common options, one way to fail.

This module sits below all the command modules and imports none of them (no import circle).
"""

from __future__ import annotations

import os
import re
import sys
from enum import Enum
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = [
    "EXAMPLE_PREFIX",
    "PIPED_WIDTH",
    "Device",
    "GeneratorName",
    "Policy",
    "Tolerance",
    "fail",
    "make_console",
    "resolve_path",
    "safe_name",
]

EXAMPLE_PREFIX = "example:"
PIPED_WIDTH = 200  # rich's 80 columns would wrap a piped line mid-phrase


class Device(str, Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


class GeneratorName(str, Enum):
    auto = "auto"
    llm = "llm"
    builtin = "builtin"


class Policy(str, Enum):
    hybrid = "hybrid"
    strict = "strict"


class Tolerance(str, Enum):
    kernelbench = "kernelbench"
    numerics = "numerics"


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr): rich on a terminal; when piped, long lines stay whole and no
    live display (spinner, progress bar) is drawn."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return Console(stderr=stderr)
    columns = int(os.environ.get("COLUMNS", "0") or 0)
    return Console(stderr=stderr, width=max(columns, PIPED_WIDTH), soft_wrap=True)


def fail(message: str, *, code: int = 2, hint: str | None = None) -> NoReturn:
    """Print ``error: message`` (and a hint saying what to do) on stderr and exit with ``code``."""
    err = make_console(stderr=True)
    err.print(f"[red]error:[/red] {escape(message)}")
    if hint:
        err.print(escape(hint))
    raise typer.Exit(code)


def resolve_path(value: str, *, what: str = "file") -> Path:
    """A file path, or ``example:NAME`` for a file bundled with tritonsmith."""
    if value.startswith(EXAMPLE_PREFIX):
        from tritonsmith.examples import example_path

        try:
            return example_path(value.removeprefix(EXAMPLE_PREFIX))
        except FileNotFoundError as exc:
            raise typer.BadParameter(str(exc)) from None
    path = Path(value)
    if path.is_dir():
        raise typer.BadParameter(f"{value} is a directory; give one {what} (.py). To run every problem of a "
                                 f"directory: tritonsmith bench {value}")
    if not path.is_file():
        raise typer.BadParameter(f"file not found: {value}")
    return path


def safe_name(name: str) -> str:
    """``name`` made safe as a file or folder name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "problem"
