"""The retrieve node reads the memory's per-shape tuning cache and the generate node hands it on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tritonsmith.agents.base import Candidate, GenerationRequest
from tritonsmith.core.settings import KernelContext, Settings
from tritonsmith.graphs import nodes
from tritonsmith.graphs.nodes import KernelNodes, spec_from_problem
from tritonsmith.tools.ports import RetrievedKernel, VariantCache

_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2.0


def get_inputs():
    return [torch.randn(7, 33)]


def get_init_inputs():
    return []
'''


class _Store:
    """A KernelStore without the optional cache."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def similar(self, problem: Any, *, k: int, device_name: str | None = None) -> list[RetrievedKernel]:
        return [RetrievedKernel(problem_name="other", source="# a kernel\n", reason="similarity 0.9")]

    def search_text(self, query: str, *, k: int) -> list[RetrievedKernel]:
        return []

    def remember(self, *args: Any, **kwargs: Any) -> str | None:
        return None


class _TunedStore(_Store):
    def tuned_variants(self, problem: Any, *, device_name: str) -> list[str]:
        self.asked.append((problem.name, device_name))
        return ["pw-4096", "default"]


class _Generator:
    name = "builtin"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> Candidate:
        self.requests.append(request)
        return Candidate(source=None, note="nothing", exhausted=True)


def _nodes(store: Any, generator: _Generator) -> KernelNodes:
    deps = SimpleNamespace(settings=lambda context: Settings(), store=lambda settings: store,
                           store_note=lambda settings: None, generator_for=lambda settings: (generator, None))
    return KernelNodes(deps)  # type: ignore[arg-type]


def _runtime(events: list[dict[str, Any]]) -> Any:
    return SimpleNamespace(context=KernelContext(), stream_writer=events.append)


def test_on_a_gpu_the_cache_is_read_and_reaches_the_generator(monkeypatch):
    monkeypatch.setattr(nodes, "_cuda_name", lambda: "NVIDIA H100 80GB HBM3")
    store, generator, events = _TunedStore(), _Generator(), []
    assert isinstance(store, VariantCache) and not isinstance(_Store(), VariantCache)
    graph = _nodes(store, generator)
    state: dict[str, Any] = {"problem": spec_from_problem(_SOURCE), "device": "cuda"}
    state.update(graph.retrieve(state, _runtime(events)))  # type: ignore[arg-type]
    assert state["tuned_variants"] == ["pw-4096", "default"]
    assert [device for _, device in store.asked] == ["NVIDIA H100 80GB HBM3"]
    assert events[-1]["tuned_variants"] == ["pw-4096", "default"]
    graph.generate(state, _runtime(events))  # type: ignore[arg-type]
    assert generator.requests[0].tuned_variants == ("pw-4096", "default")


def test_without_a_gpu_or_without_the_cache_nothing_is_tuned(monkeypatch):
    monkeypatch.setattr(nodes, "_cuda_name", lambda: None)
    cpu_state: dict[str, Any] = {"problem": spec_from_problem(_SOURCE), "device": "cpu"}
    tuned_store = _TunedStore()
    assert _nodes(tuned_store, _Generator()).retrieve(cpu_state, _runtime([]))["tuned_variants"] == []
    assert tuned_store.asked == []  # speeds are GPU measurements: the CPU interpreter has none to reuse
    monkeypatch.setattr(nodes, "_cuda_name", lambda: "NVIDIA H100 80GB HBM3")
    gpu_state: dict[str, Any] = {"problem": spec_from_problem(_SOURCE), "device": "cuda"}
    found = _nodes(_Store(), _Generator()).retrieve(gpu_state, _runtime([]))
    assert found["tuned_variants"] == [] and len(found["examples"]) == 1
