"""Shared fixtures: bundled example problem/candidate, and the GPU marker's skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonsmith.examples import example_path

KERNELBENCH_DEV = Path(__file__).resolve().parents[2] / "shared" / "kernelbench-dev"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def softmax_reference() -> Path:
    return example_path("softmax_reference.py")


@pytest.fixture
def softmax_candidate() -> str:
    return example_path("softmax_triton.py").read_text()
