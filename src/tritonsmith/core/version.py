"""Which tritonsmith wrote a result: the package version, plus the git commit when run from a checkout.

Suite runs can be resumed after the code changed; each record carries this so a report can say when its
problems came from different versions instead of silently mixing them.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import subprocess
from pathlib import Path

__all__ = ["__version__", "code_version", "source_digest"]

__version__ = "0.1.0"  # the package's version (pyproject.toml says the same)

log = logging.getLogger(__name__)


@functools.cache
def code_version() -> str:
    """``"0.1.0"``, or in a git checkout ``"0.1.0+g1a2b3c4.s5d6e7f80"``: the commit (``".dirty"`` after it with
    uncommitted changes) and a digest of the package's own source files.

    The digest names the code that ran even where the git metadata does not: a working tree copied to
    another machine can carry a stale ``.git`` (seen on the GPU machine, a commit behind).
    """
    root = Path(__file__).resolve().parents[1]  # the package: src/tritonsmith (this file is core/version.py)
    project = root.parent.parent / "pyproject.toml"  # src/tritonsmith in tritonsmith's own checkout
    if not (project.is_file() and 'name = "tritonsmith"' in project.read_text(encoding="utf-8")):
        return __version__  # installed from a wheel: a git repository around it would be someone else's
    try:
        out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty=.dirty", "--abbrev=7",
                              "--match", "NO-TAGS-WANTED"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:  # no git, or a hung one: the version alone still says a lot
        log.debug("git describe failed: %s", exc)
        return __version__
    commit = out.stdout.strip()
    return f"{__version__}+g{commit}.s{source_digest(root)}" if out.returncode == 0 and commit else __version__


def source_digest(package: Path) -> str:
    """The first 8 hex digits of a SHA-256 over the package's ``.py`` files (relative path and content)."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:8]
