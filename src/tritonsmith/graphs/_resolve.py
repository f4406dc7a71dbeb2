"""Turn the builder's arguments plus a run's settings into a generator, a kernel store and a profiler.

Resolution happens when a run first needs each piece (never at import or build time), and is cached
per settings, so building a graph never needs a key, a GPU or a database.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.tools import BaseTool

from tritonsmith.agents.base import Generator
from tritonsmith.agents.llm import LLMGenerator, pricing_from
from tritonsmith.core.settings import KernelContext, Settings
from tritonsmith.tools.ports import (
    Evaluator,
    KernelProfiler,
    KernelStore,
    as_store,
    default_evaluator,
    default_profiler,
    open_default_memory,
)

log = logging.getLogger(__name__)

AUTO_BUILTIN_NOTE = ("no model configured (no API key, no base URL): using the built-in generator, which needs "
                     "no LLM; set OPENAI_API_KEY or --base-url to use a model")


@dataclass(kw_only=True)
class GraphDeps:
    """What ``build_kernel_graph`` was given; None / ``"default"`` mean "resolve from the run's settings"."""

    generator: Generator | None = None
    model: Any = None
    memory: Any = None
    tools: Sequence[BaseTool] | Literal["default"] = "default"
    profiler: KernelProfiler | None | Literal["default"] = "default"
    evaluator: Evaluator | None = None
    arguments: KernelContext | None = None
    _cache: dict[tuple[str, Any], Any] = field(default_factory=dict, repr=False)
    _settings: dict[Any, Settings] = field(default_factory=dict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def settings(self, run_context: Any) -> Settings:
        """The run's settings: resolved by its first node, then shared by every later node of the run."""
        with self._lock:
            return Settings.resolve_cached(self.arguments, run_context, self._settings)

    def _cached(self, kind: str, key: Any, make: Any) -> Any:
        with self._lock:
            if (kind, key) not in self._cache:
                self._cache[(kind, key)] = make()
            return self._cache[(kind, key)]

    def evaluate_fn(self) -> Evaluator:
        return self.evaluator or default_evaluator()

    def store(self, settings: Settings) -> KernelStore | None:
        if self.memory is False:
            return None
        if self.memory is not None:
            return self._cached("store", None, lambda: as_store(self.memory))
        if not settings.use_memory:
            return None
        return self._cached("store", settings.memory_dir, lambda: open_default_memory(settings.memory_dir))[0]

    def store_note(self, settings: Settings) -> str | None:
        """Why the default memory is missing, if it failed to open."""
        if self.memory is not None or not settings.use_memory:
            return None
        return self._cached("store", settings.memory_dir, lambda: open_default_memory(settings.memory_dir))[1]

    def profiler_fn(self) -> KernelProfiler | None:
        if self.profiler == "default":
            return self._cached("profiler", None, default_profiler)
        return self.profiler  # type: ignore[return-value]

    def generator_for(self, settings: Settings) -> tuple[Generator, str | None]:
        """The generator of this run, and a note when it was chosen for the user (no model configured)."""
        if self.generator is not None:
            return self.generator, None
        choice = settings.generator
        if self.model is not None and not isinstance(self.model, str) and choice != "builtin":
            return self._cached("llm-model", settings, lambda: self._llm(settings, self.model)), None
        if choice == "llm" or (choice == "auto" and settings.llm_configured):
            return self._cached("llm", settings, lambda: self._llm(settings, None)), None
        builtin = self._cached("builtin", None, _builtin_generator)
        return builtin, (AUTO_BUILTIN_NOTE if choice == "auto" else None)

    def _llm(self, settings: Settings, model: Any) -> LLMGenerator:
        from tritonsmith.agents import default_toolkit

        kwargs: dict[str, Any] = {}
        if self.tools == "default":
            eval_settings = {"tolerance": settings.tolerance, "scale": settings.scale,
                             "timeout_s": settings.eval_timeout_s}
            kwargs["toolkit"] = default_toolkit(store=self.store(settings), profiler=self.profiler_fn(),
                                                evaluate=self.evaluate_fn(), eval_settings=eval_settings,
                                                max_evaluations=settings.max_draft_evaluations)
        else:
            kwargs["tools"] = tuple(self.tools)
        if model is None:
            return LLMGenerator.from_settings(settings, **kwargs)
        return LLMGenerator(model, max_tool_rounds=settings.max_tool_rounds, pricing=pricing_from(settings),
                            context_tokens=settings.llm_context_tokens, **kwargs)


def _builtin_generator() -> Generator:
    """The built-in generator (imported here: building a graph must not import torch)."""
    from tritonsmith.agents import BuiltinGenerator

    return BuiltinGenerator()
