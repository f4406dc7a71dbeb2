"""The small interfaces the graph needs from its collaborators, and adapters to the real modules.

The graph talks to the evaluator, the kernel memory and the profiler only through these protocols, so
tests and users can plug in their own. The real modules are imported lazily, when a run first needs them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem
    from tritonsmith.core.results import EvalResult

__all__ = [
    "Evaluator",
    "KernelProfiler",
    "KernelStore",
    "MemoryStore",
    "RetrievedKernel",
    "VariantCache",
    "as_store",
    "default_evaluator",
    "default_profiler",
    "open_default_memory",
]

log = logging.getLogger(__name__)


class Evaluator(Protocol):
    """``tritonsmith.evaluator.evaluate``'s shape (the keywords the graph passes)."""

    def __call__(self, problem: Problem, candidate: str, *, device: str, trials: int, tolerance: str,
                 policy: str, timeout_s: float | None, scale: bool) -> EvalResult: ...


@runtime_checkable
class KernelProfiler(Protocol):
    """Profiles a correct candidate; returns findings as text, or None when it cannot (e.g. no GPU)."""

    def __call__(self, problem: Problem, source: str, *, device: str) -> str | None: ...


@dataclass(frozen=True, kw_only=True)
class RetrievedKernel:
    """A kernel from memory: the problem it solved, its source, and why it was picked."""

    problem_name: str
    source: str
    reason: str = ""
    record_id: str | None = None


@runtime_checkable
class KernelStore(Protocol):
    """What the graph needs from a kernel memory."""

    def similar(self, problem: Problem, *, k: int, device_name: str | None = None) -> list[RetrievedKernel]: ...

    def search_text(self, query: str, *, k: int) -> list[RetrievedKernel]: ...

    def remember(self, problem: Problem, source: str, result: EvalResult, *, iteration: int,
                 generator: str) -> str | None: ...


@runtime_checkable
class VariantCache(Protocol):
    """Optional beside :class:`KernelStore`: the built-in generator's variants measured fastest for exactly
    this problem on this device (a per-shape tuning cache); the generator tries them first."""

    def tuned_variants(self, problem: Problem, *, device_name: str) -> list[str]: ...


class MemoryStore:
    """:class:`KernelStore` (and :class:`VariantCache`) over ``tritonsmith.memory.KernelMemory`` (Chroma or
    in-memory)."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    def similar(self, problem: Problem, *, k: int, device_name: str | None = None) -> list[RetrievedKernel]:
        from tritonsmith.tools.kernel_search import search_kernels

        from tritonsmith.memory import SearchFilters

        # The prompt's examples are pure Triton: a hybrid kernel (torch computed part) would teach the fallback.
        found = search_kernels(problem=problem, k=k, device_name=device_name, memory=self.memory,
                               filters=SearchFilters(pure_triton_only=True))
        return [_example(ex) for ex in found.examples]

    def search_text(self, query: str, *, k: int) -> list[RetrievedKernel]:
        from tritonsmith.tools.kernel_search import search_kernels

        found = search_kernels(query, k=k, memory=self.memory)
        return [_example(ex) for ex in found.examples]

    def tuned_variants(self, problem: Problem, *, device_name: str) -> list[str]:
        return list(self.memory.tuned_variants(problem.source, device_name))

    def remember(self, problem: Problem, source: str, result: EvalResult, *, iteration: int,
                 generator: str) -> str | None:
        from tritonsmith.memory import record_from_eval

        record = record_from_eval(problem, source, result, iteration=iteration, generator=generator)
        return self.memory.add(record).id


def _example(ex: Any) -> RetrievedKernel:
    """``tritonsmith.tools.kernel_search.KernelExample`` -> :class:`RetrievedKernel`."""
    reason = ex.reason + (" (code truncated)" if ex.truncated else "")
    return RetrievedKernel(problem_name=ex.problem_name, source=ex.code, reason=reason, record_id=ex.id)


def as_store(memory: Any) -> KernelStore:
    """Accept a :class:`KernelStore` or a ``KernelMemory`` (anything with ``search`` and ``add``)."""
    if isinstance(memory, KernelStore):
        return memory
    if hasattr(memory, "search") and hasattr(memory, "add"):
        return MemoryStore(memory)
    raise TypeError(f"memory must be a KernelMemory or a KernelStore, not {type(memory).__name__}")


def default_evaluator() -> Evaluator:
    from tritonsmith.evaluator import evaluate

    return evaluate  # type: ignore[return-value]


def open_default_memory(memory_dir: str | None) -> tuple[KernelStore | None, str | None]:
    """The on-disk kernel memory (``tritonsmith.memory.open_memory``), or (None, why) when it cannot open.

    The memory only helps the generator, so an unwritable directory or an unreachable Chroma server
    ends in a note, not a failed run.
    """
    from tritonsmith.memory import open_memory  # here, not at import: chromadb loads only when a run needs it

    try:
        return MemoryStore(open_memory(memory_dir)), None
    except (OSError, ConnectionError, ValueError) as exc:  # unwritable dir, unreachable server, bad config
        log.warning("kernel memory unavailable: %s", exc)
        return None, f"kernel memory unavailable ({type(exc).__name__}: {exc}): running without it"


@dataclass(frozen=True)
class _ToolsProfiler:
    """Adapter over ``tritonsmith.profiler.profile.profile_kernel`` (report with a text summary); an empty
    source profiles the reference."""

    ncu: bool = True

    def __call__(self, problem: Problem, source: str, *, device: str) -> str | None:
        # looked up at call time: a suite worker wraps profile_kernel in the GPU lock
        from tritonsmith.profiler import profile as profile_module

        report = profile_module.profile_kernel(problem, source or None, device=device, ncu=self.ncu)
        return report.feedback() or None


def default_profiler(*, ncu: bool = True) -> KernelProfiler:
    """The real profiler (``tritonsmith.profiler.profile_kernel``), loaded when it first runs."""
    return _ToolsProfiler(ncu=ncu)
