"""Fixtures of the CLI tests: no key, no server and no memory from the developer's shell."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonsmith.core.settings import ENV


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for names in ENV.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.setenv("TRITONSMITH_MEMORY_DIR", str(tmp_path / "memory"))  # never the user's own store
