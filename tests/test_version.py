from __future__ import annotations

from pathlib import Path

from tritonsmith._version import code_version, source_digest


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


def test_code_version_of_this_checkout_names_its_source_digest() -> None:
    import tritonsmith

    version = code_version()
    assert version.startswith(tritonsmith.__version__)
    if "+g" in version:  # a git checkout (CI's clean clone is one)
        assert version.endswith(".s" + source_digest(Path(tritonsmith.__file__).parent))
