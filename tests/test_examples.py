"""The examples in examples/ run as users run them (offline, on the CPU interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("call_tool.py", "status: wrong_output"),
        ("embed_graph.py", "(correct, reward 0.50)"),
        ("embed_graph.py", "'generator': 'scripted'"),  # offline events do not claim an LLM
        ("add_node.py", "nodes to hook onto: analyze, retrieve, generate, evaluate, profile, decide, remember"),
    ],
)
def test_example_runs(script: str, expected: str, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TRITONSMITH_MEMORY_DIR": str(tmp_path / "memory")}
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert expected in done.stdout
    assert "'generator': 'llm'" not in done.stdout
