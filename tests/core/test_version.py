from __future__ import annotations

from pathlib import Path

import pytest

from tritonsmith.core.version import code_version, source_digest


def test_source_digest_follows_the_code_not_the_git_metadata(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    (pkg / "notes.txt").write_text("not code")
    first = source_digest(pkg)
    assert len(first) == 8 and int(first, 16) >= 0
    (pkg / "notes.txt").write_text("changed, still not code")
    assert source_digest(pkg) == first
    (pkg / "sub" / "b.py").write_text("y = 3\n")
    assert source_digest(pkg) != first
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    (pkg / "sub" / "b.py").rename(pkg / "b.py")  # same content, moved: different code layout
    assert source_digest(pkg) != first


def test_code_version_names_the_commit_and_the_source_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    import tritonsmith
    from tritonsmith.core import version as _version

    def describe(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 0, stdout="1a2b3c4.dirty\n", stderr="")

    monkeypatch.setattr(_version.subprocess, "run", describe)
    _version.code_version.cache_clear()
    try:
        version = code_version()
    finally:
        _version.code_version.cache_clear()
    digest = source_digest(Path(tritonsmith.__file__).parent)
    assert version == f"{tritonsmith.__version__}+g1a2b3c4.dirty.s{digest}"
