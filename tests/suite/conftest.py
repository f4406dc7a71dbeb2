"""Small KernelBench-format problems written per test, and the fakes module on the workers' path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from suite_problems import write_problem  # noqa: F401 - re-exported for tests


@pytest.fixture
def fakes_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker processes import ``suite_fakes`` by name."""
    import os

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.syspath_prepend(str(HERE))


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    """level1: three problems (one the fake gets wrong); level2: one."""
    root = tmp_path / "problems"
    write_problem(root / "level1" / "1_Relu.py")
    write_problem(root / "level1" / "2_wrong_Add.py", "x + 1.0", rows=5, cols=17)
    write_problem(root / "level1" / "10_Tanh.py", "torch.tanh(x)", rows=3, cols=129)
    write_problem(root / "level2" / "4_Scale.py", "x * 3.0", rows=9, cols=11)
    return root
