"""Kernel search: the most similar verified kernels from memory, ranked by similarity and measured speed.

``search_kernels`` is the plain function; ``make_kernel_search_tool`` wraps it for LangChain agents (the
LLM generator's ``ToolNode`` runs the same tool). Both search a ``KernelMemory`` or any
:class:`~tritonsmith.tools.ports.KernelStore` (the graph's port: a user's own store, a test's fake).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tritonsmith.core.contract import torch_computes_line
from tritonsmith.core.deprecation import warn_deprecated
from tritonsmith.core.problem import Problem

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from tritonsmith.memory import KernelMemory, SearchFilters, SearchHit
    from tritonsmith.tools.ports import KernelStore, RetrievedKernel

__all__ = ["KernelExample", "KernelSearchResult", "make_kernel_search_tool", "search_kernels"]

log = logging.getLogger(__name__)

DEFAULT_BUDGET = 6000


@dataclass(frozen=True, kw_only=True)
class KernelExample:
    """One retrieved kernel, as a generator sees it. A :class:`KernelStore` of one's own gives no similarity,
    score, device or speedups (None, "")."""

    id: str
    problem_name: str
    code: str
    reason: str
    similarity: float | None = None
    score: float | None = None
    device_name: str = ""
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    truncated: bool = False


@dataclass(frozen=True, kw_only=True)
class KernelSearchResult:
    """``status``: ``ok`` (examples found), ``empty`` (nothing matched), ``invalid`` (bad arguments: see
    ``message``), ``unavailable`` (the memory could not be opened: see ``message``)."""

    status: Literal["ok", "empty", "invalid", "unavailable"]
    message: str
    examples: tuple[KernelExample, ...] = ()
    budget: int = DEFAULT_BUDGET
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_prompt(self) -> str:
        """The examples as prompt text, at most ``budget`` characters."""
        if not self.examples:
            return self.message
        parts = [self.message]
        for i, ex in enumerate(self.examples, 1):
            cut = " (code truncated to fit)" if ex.truncated else ""
            parts.append(f"### Example {i}: {ex.problem_name} [{ex.id[:12]}]\nwhy: {ex.reason}{cut}\n"
                         f"```python\n{ex.code}\n```")
        return "\n\n".join(parts)[: self.budget]


def search_kernels(
    query: str | None = None,
    *,
    problem: Problem | None = None,
    k: int = 3,
    filters: SearchFilters | None = None,
    device_name: str | None = None,
    budget: int = DEFAULT_BUDGET,
    memory: KernelMemory | KernelStore | None = None,
) -> KernelSearchResult:
    """Find verified Triton kernels for problems like this one, to start from or copy patterns of.

    Give ``problem`` (best: its traced ops are compared) or ``query`` (free text such as "row softmax with
    a fused scale", or a KernelBench source). Up to ``k`` examples come back, most useful first: similar
    problems, and among those the ones measured fastest on ``device_name``'s device class. Failed kernels
    are never returned. The code of all examples fits in ``budget`` characters (lower-ranked code is cut
    first). ``memory``: a ``KernelMemory`` (default: :func:`~tritonsmith.memory.open_memory`) or any
    :class:`~tritonsmith.tools.ports.KernelStore` (its ``similar`` / ``search_text``; ``filters`` unused).
    """
    if k < 1 or k > 20:
        return KernelSearchResult(status="invalid", message=f"k must be between 1 and 20, got {k}", budget=budget)
    if problem is None and not (query and query.strip()):
        return KernelSearchResult(status="invalid", budget=budget,
                                  message="give a query (what the kernel computes) or a problem")
    if memory is None:
        memory, failure = _default_memory()
        if memory is None:
            return KernelSearchResult(status="unavailable", message=failure, budget=budget)
    if _is_store(memory):
        found = _from_store(memory, query, problem=problem, k=k, device_name=device_name)  # type: ignore[arg-type]
    else:
        found = [_from_hit(h) for h in memory.search(problem if problem is not None else str(query), k=k,  # type: ignore[union-attr]
                                                     filters=filters, device_name=device_name)]
    if not found:
        return KernelSearchResult(status="empty", budget=budget,
                                  message="no verified kernel in memory matches; write one from scratch")
    examples = _fit(found, budget)
    msg = f"{len(examples)} verified kernel(s) from memory, most useful first (similarity, then measured speed):"
    return KernelSearchResult(status="ok", message=msg, examples=tuple(examples), budget=budget)


def _default_memory() -> tuple[KernelMemory | None, str]:
    from tritonsmith.memory import open_memory

    try:
        return open_memory(), ""
    except (OSError, ConnectionError, ValueError, ImportError) as exc:  # no server, bad dir or config
        log.warning("kernel memory unavailable: %s", exc)
        return None, f"kernel memory unavailable: {type(exc).__name__}: {exc}"


def _is_store(memory: object) -> bool:
    """A :class:`KernelStore` (the graph's port) rather than a ``KernelMemory``: it answers ``search_text``."""
    return callable(getattr(memory, "search_text", None))


def _from_store(store: KernelStore, query: str | None, *, problem: Problem | None, k: int,
                device_name: str | None) -> list[tuple[KernelExample, str]]:
    kernels = (store.similar(problem, k=k, device_name=device_name) if problem is not None
               else store.search_text(str(query), k=k))
    return [(KernelExample(id=r.record_id or "", problem_name=r.problem_name, code=r.source, reason=r.reason), "")
            for r in kernels]


def _from_hit(hit: SearchHit) -> tuple[KernelExample, str]:
    """The hit as an example, and what its reason gains for a hybrid kernel (what torch computes)."""
    ev = hit.record.evaluation
    example = KernelExample(
        id=hit.record.id, problem_name=hit.record.problem_name, code=hit.record.kernel_source,
        similarity=hit.similarity, score=hit.score, reason=hit.reason, device_name=ev.device_name,
        speedup_vs_eager=ev.speedup_vs_eager, speedup_vs_compile=ev.speedup_vs_compile)
    return example, (f" (hybrid kernel: {torch_computes_line(ev.torch_ops)})" if ev.hybrid else "")


_HEADER = 200  # per-example text around the code: title, why, fences


def _fit(found: list[tuple[KernelExample, str]], budget: int) -> list[KernelExample]:
    """Share ``budget`` among the examples: the best keeps its whole code when it can, the rest are cut first."""
    room = max(0, budget - 120)
    out: list[KernelExample] = []
    for i, (ex, note) in enumerate(found):
        code = ex.code
        remaining = len(found) - i - 1
        reserve = min(remaining * 600, room // 2)  # leave later examples something to say
        allowed = max(0, room - reserve - _HEADER - len(ex.reason))
        if allowed < 200:
            break
        truncated = len(code) > allowed
        reason = ex.reason + note
        if truncated:
            code = code[:allowed].rsplit("\n", 1)[0] + "\n# ..."
        room -= len(code) + _HEADER + len(reason)
        out.append(dataclasses.replace(ex, code=code, reason=reason, truncated=truncated))
    return out


def make_kernel_search_tool(
    memory: KernelMemory | KernelStore | None = None,
    *,
    device_name: str | None = None,
    budget: int = DEFAULT_BUDGET,
) -> BaseTool:
    """A LangChain tool ``kernel_search(query, k)`` over ``memory``: a ``KernelMemory``, any
    :class:`~tritonsmith.tools.ports.KernelStore`, or None (:func:`~tritonsmith.memory.open_memory` on the
    first call: building the tool opens nothing)."""
    from langchain_core.tools import StructuredTool

    from tritonsmith.tools.submit import bad_arguments

    def kernel_search(query: str, k: int = 3) -> str:
        """Search memory for verified Triton kernels of similar problems (with their measured speedups).

        Args:
            query: what the kernel computes, e.g. "conv2d then bias, relu and scale fused" or the PyTorch source.
            k: how many examples (1-20).
        """
        return search_kernels(query, k=k, memory=memory, device_name=device_name, budget=budget).to_prompt()

    return StructuredTool.from_function(kernel_search, name="kernel_search", parse_docstring=True,
                                        handle_validation_error=bad_arguments)


def __getattr__(name: str) -> Any:
    # Deprecated: the default tool, built on first use (creating it must not open or seed the memory).
    if name == "kernel_search_tool":
        warn_deprecated("tritonsmith.tools.kernel_search.kernel_search_tool", "make_kernel_search_tool()")
        return make_kernel_search_tool()
    raise AttributeError(name)
