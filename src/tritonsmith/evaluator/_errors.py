"""Turn exceptions raised by candidate code into short messages that point at the candidate's lines."""

from __future__ import annotations

import linecache
import traceback
from pathlib import Path

_MAX_ERROR_CHARS = 2000


class CandidateFailure(Exception):
    """The candidate failed at ``stage`` with ``status`` (compile_error, runtime_error, rejected + ``rule``...)."""

    def __init__(self, status: str, stage: str, message: str, detail: str | None = None, *,
                 rule: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.status = status
        self.stage = stage
        self.message = message
        self.detail = detail


def is_compile_error(exc: BaseException) -> bool:
    """Triton reports kernel compile errors at first launch; recognise them by type name."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                         "SyntaxError", "ImportError", "ModuleNotFoundError"})


def describe(exc: BaseException, candidate_path: Path) -> str:
    """The exception's last line plus the traceback frames that lie in the candidate file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == candidate_path]
    lines = [f"  candidate line {f.lineno}, in {f.name}: {(f.line or linecache.getline(f.filename, f.lineno or 0)).strip()}"
             for f in frames[-6:]]
    if isinstance(exc, SyntaxError) and exc.filename == str(candidate_path):
        lines.append(f"  candidate line {exc.lineno}: {(exc.text or '').strip()}")
    head = f"{type(exc).__name__}: {exc}".strip()
    if len(head) > _MAX_ERROR_CHARS:
        head = head[: _MAX_ERROR_CHARS // 2] + "\n  ...\n" + head[-_MAX_ERROR_CHARS // 2 :]
    text = head + ("\nTraceback (candidate frames):\n" + "\n".join(lines) if lines else "")
    return text
