"""The device: one setting, one default, resolved once; every node of a run uses that one answer."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tritonsmith.agents.base import Candidate, GenerationRequest
from tritonsmith.core.device import DEFAULT_DEVICE, resolve_device
from tritonsmith.core.results import EvalResult, EvalStatus


def test_auto_is_the_default_and_picks_cuda_only_when_a_gpu_is_visible():
    assert DEFAULT_DEVICE == "auto"
    assert resolve_device() == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu' or 'cuda'"):
        resolve_device("gpu")


def test_the_generator_and_the_evaluator_see_the_device_analyze_resolved(softmax_reference, softmax_candidate,
                                                                         monkeypatch: pytest.MonkeyPatch):
    from tritonsmith.graphs import optimize
    import tritonsmith.graphs.nodes as nodes_module

    resolved: list[str] = []

    def resolve_once(device: str = DEFAULT_DEVICE) -> str:
        resolved.append(device)
        return "cpu"

    monkeypatch.setattr(nodes_module, "resolve_device", resolve_once)
    seen: dict[str, list[str]] = {"generator": [], "evaluator": []}

    class Generator:
        name = "scripted"

        def generate(self, request: GenerationRequest) -> Candidate:
            seen["generator"].append(request.device)
            return Candidate(source=f"{softmax_candidate}\n# attempt {request.iteration}\n")  # no duplicate

    def evaluator(problem: Any, candidate: str, **kwargs: Any) -> EvalResult:
        seen["evaluator"].append(kwargs["device"])
        return EvalResult(status=EvalStatus.WRONG_OUTPUT, message="wrong", problem=problem.name,
                          device=kwargs["device"], device_name="cpu", tolerance="kernelbench")

    result = optimize(softmax_reference, generator=Generator(), evaluator=evaluator, profiler=None, memory=False,
                      iterations=2, device="auto")
    assert resolved == ["auto"]  # once, by analyze
    assert seen == {"generator": ["cpu", "cpu"], "evaluator": ["cpu", "cpu"]} and result.device == "cpu"
