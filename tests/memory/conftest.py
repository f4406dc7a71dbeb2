"""Fixtures of the memory tests (helpers live in memhelp.py, importable from any test directory)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tritonsmith.memory import ChromaKernelMemory, InMemoryKernelMemory, KernelMemory


@pytest.fixture(params=["in_memory", "chroma"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KernelMemory]:
    if request.param == "in_memory":
        yield InMemoryKernelMemory()
    else:
        yield ChromaKernelMemory(path=tmp_path / "store")
