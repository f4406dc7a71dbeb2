"""benchmarks/write_variants.py: candidates of chosen variants, named by variant, and constant overrides."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.benchmarks._scripts import load_script
from tritonsmith.agents.builtin import _rowkernel
from tritonsmith.examples import example_path

write_variants = load_script("write_variants")


def _run(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["write_variants", *args])
    return write_variants.main()


def test_writes_each_variant_on_the_menu_and_skips_the_others(tmp_path: Path, monkeypatch, capsys):
    ref = example_path("softmax_reference.py")
    assert _run(monkeypatch, str(tmp_path), f"{ref}:default,no-such-variant") == 0
    assert [p.name for p in tmp_path.iterdir()] == ["softmax_reference__default.py"]
    assert "class ModelNew" in (tmp_path / "softmax_reference__default.py").read_text()
    assert "no-such-variant not on the menu" in capsys.readouterr().out


def test_set_overrides_a_generator_constant_and_labels_the_files(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(_rowkernel, "SPLIT_MIN_R", _rowkernel.SPLIT_MIN_R)  # restored after the test
    ref = example_path("softmax_reference.py")
    assert _run(monkeypatch, "--set", "_rowkernel.SPLIT_MIN_R=4096", "--label", "split4k", str(tmp_path), str(ref)) == 0
    assert _rowkernel.SPLIT_MIN_R == 4096
    assert [p.name for p in tmp_path.iterdir()] == ["softmax_reference__default-split4k.py"]
    with pytest.raises(SystemExit, match="has no NOPE"):
        _run(monkeypatch, "--set", "_rowkernel.NOPE=1", str(tmp_path), str(ref))
