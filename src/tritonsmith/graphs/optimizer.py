"""``optimize``: one call from a PyTorch reference to the best verified Triton kernel."""

from __future__ import annotations

import json
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tritonsmith.core.deprecation import warn_deprecated
from tritonsmith.core.results import Attempt, EvalResult
from tritonsmith.core.settings import GeneratorChoice, KernelContext, Settings
from tritonsmith.graphs._floor import slower_line
from tritonsmith.graphs.builder import ExtraNode, compile_kernel_graph
from tritonsmith.graphs.nodes import spec_from_problem
from tritonsmith.graphs.state import AttemptRecord, KernelState

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool
    from langgraph.types import Checkpointer

    from tritonsmith.agents.base import Generator
    from tritonsmith.core.problem import Problem
    from tritonsmith.tools.ports import Evaluator, KernelProfiler

__all__ = ["OptimizeInterrupted", "OptimizeResult", "ProgressEvent", "optimize"]

log = logging.getLogger(__name__)

ProgressEvent = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class OptimizeResult:
    """The outcome of one run. ``status`` is ``verified`` (a correct kernel exists) or ``gave_up``.

    ``best_reward``'s basis says whether it comes from a GPU timing vs torch.compile or is the
    "correct, speed unmeasured" value of the CPU interpreter. ``slower`` is a line saying so when even the
    best verified kernel is slower than torch.compile beyond noise (``_floor.slower_line``), else None.
    """

    problem: str
    status: Literal["verified", "gave_up", "interrupted"]
    reason: str
    device: str
    generator: str
    best_source: str | None
    best_result: EvalResult | None
    best_reward: float | None
    best_iteration: int | None
    attempts: tuple[Attempt, ...]
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    notes: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    slower: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "verified"

    @property
    def rewards(self) -> tuple[float, ...]:
        return tuple(a.reward for a in self.attempts)

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.best_result.speedup_vs_compile if self.best_result else None

    @classmethod
    def from_state(cls, state: KernelState, settings: Settings) -> OptimizeResult:
        best: AttemptRecord | None = state.get("best")
        decision = state.get("decision") or {"action": "give_up", "reason": "the run did not finish"}
        usage = state.get("usage") or {}
        problem = state["problem"]
        return cls(
            problem=problem["name"] if isinstance(problem, dict) else str(problem),
            status="verified" if best is not None else "gave_up", reason=decision["reason"],
            device=state.get("device", settings.device), generator=state.get("generator", "user"),
            best_source=best["source"] if best else None,
            best_result=EvalResult.from_dict(best["result"]) if best and best["result"] else None,
            best_reward=best["reward"] if best else None, best_iteration=best["iteration"] if best else None,
            attempts=tuple(Attempt.from_dict(a) for a in state.get("attempts", [])),
            input_tokens=usage.get("input_tokens", 0), output_tokens=usage.get("output_tokens", 0),
            cost_usd=usage.get("cost_usd"), notes=tuple(state.get("notes", [])), settings=settings.public_dict(),
            slower=slower_line(best, state.get("attempts", [])))

    def to_dict(self) -> dict[str, Any]:
        """The report (``report.json``): each attempt as its :meth:`~tritonsmith.core.results.Attempt.summary`."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["best_result"] = self.best_result.to_dict() if self.best_result else None
        data["attempts"] = [a.summary() for a in self.attempts]
        data["notes"] = list(self.notes)
        data["settings"] = dict(self.settings)
        data["ok"] = self.ok
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OptimizeResult:
        """Read :meth:`to_dict` back (a ``report.json``, also one written before attempts were one type)."""
        d = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        d["best_result"] = EvalResult.from_dict(d["best_result"]) if d.get("best_result") else None
        d["attempts"] = tuple(Attempt.from_dict(a) for a in d.get("attempts") or ())
        d["notes"] = tuple(d.get("notes") or ())
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_markdown(self) -> str:
        from tritonsmith.graphs._report import markdown_report

        return markdown_report(self)


def optimize(
    problem: Problem | str | Path,
    *,
    model: BaseChatModel | str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    iterations: int | None = None,
    device: str | None = None,
    start_from: str | Path | None = None,
    generator: Generator | GeneratorChoice | None = None,
    memory: Any = None,
    tools: Sequence[BaseTool] | Literal["default"] = "default",
    profiler: KernelProfiler | None | Literal["default"] = "default",
    evaluator: Evaluator | None = None,
    extra_nodes: Sequence[ExtraNode] = (),
    context: KernelContext | None = None,
    on_event: Callable[[ProgressEvent], None] | None = None,
    checkpointer: Checkpointer = None,
    thread_id: str | None = None,
    resume: bool = False,
    **settings: Any,
) -> OptimizeResult:
    """Optimise ``problem`` (a KernelBench file, its source, or a :class:`Problem`) and return the best kernel.

    Without a model (no key, no base URL) the built-in generator is used and the result's notes say so.
    ``start_from`` is a kernel (file or source) to debug or speed up. ``on_event`` receives the progress
    events (``analyzed``, ``generated``, ``evaluated`` with status/speedup/reward, ``decided``...). Extra
    keywords are settings (``trials``, ``tolerance``, ``scale``, ``target_speedup``... see :class:`Settings`).
    ``resume=True`` continues the run saved by ``checkpointer`` under ``thread_id`` (``problem`` is then only
    used for its name): an interrupted run goes on from its last step, and a run the model server ended, or
    one with iterations left under the settings given now, gets its next iteration.
    ``generator``, ``model``, ``memory``, ``tools``, ``profiler``, ``evaluator`` and ``extra_nodes`` go to
    :func:`~tritonsmith.graphs.builder.build_kernel_graph` as they are.
    """
    unknown = set(settings) - set(KernelContext.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
    layer = {**_non_none(context), **settings, "base_url": base_url, "api_key": api_key,
             "iterations": iterations, "device": device}
    gen_obj = None if generator is None or isinstance(generator, str) else generator
    if isinstance(generator, str):
        layer["generator"] = generator
    if isinstance(model, str):
        layer["model"], model = model, None
    layer = {k: v for k, v in layer.items() if v is not None}
    resolved = Settings.resolve(layer)
    graph = compile_kernel_graph(generator=gen_obj, model=model, memory=memory, tools=tools, profiler=profiler,
                                 evaluator=evaluator, extra_nodes=extra_nodes, context=KernelContext(**layer),
                                 checkpointer=checkpointer)
    state_in: dict[str, Any] | None = {"problem": spec_from_problem(problem)}
    if start_from is not None:
        state_in["start_from"] = _read_kernel(start_from)
    config: dict[str, Any] = {"recursion_limit": 20 + 8 * (resolved.iterations + 1)}
    if checkpointer is not None:
        config["configurable"] = {"thread_id": thread_id or uuid.uuid4().hex}
    if resume:
        state_in = _resume_input(graph, config, resolved, thread_id)
    final: dict[str, Any] = {}
    try:
        for mode, payload in _stream(graph, state_in, config):
            if mode == "values":
                final = payload
            elif on_event is not None:
                on_event(payload)
    except KeyboardInterrupt:
        raise OptimizeInterrupted(_interrupted({**(state_in or {}), **final}, resolved)) from None
    if not final and resume:  # nothing left to run: the saved state is the result
        final = graph.get_state(config).values
    result = OptimizeResult.from_state(final, resolved)  # type: ignore[arg-type]
    for note in result.notes:
        log.info("%s", note)
    return result


def _stream(graph: Any, state_in: dict[str, Any], config: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``graph.stream(...)`` run in a thread of its own, its items handed over here.

    LangGraph runs nodes in worker threads and, when the caller's thread is interrupted, waits for the
    running node (a model call, the zygote's start-up, an evaluation) before it lets go. Waiting here
    instead, a Ctrl-C ends the run at once with the attempts finished so far; the abandoned thread can
    start no new evaluator worker after it (see ``kill_running_workers``) and ends with its node.
    """
    items: queue.Queue[tuple[str, Any]] = queue.Queue()

    def run() -> None:
        try:
            for item in graph.stream(state_in, config=config, stream_mode=["custom", "values"]):
                items.put(item)
        except BaseException as exc:  # handed to the caller's thread, raised there
            items.put(("error", exc))
        else:
            items.put(("end", None))

    threading.Thread(target=run, name="tritonsmith-optimize", daemon=True).start()
    while True:
        mode, payload = items.get()
        if mode == "end":
            return
        if mode == "error":
            raise payload
        yield mode, payload


class OptimizeInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`optimize`; ``result`` holds the attempts that finished before it (status
    ``verified`` when one of them is, else ``interrupted``)."""

    def __init__(self, result: OptimizeResult) -> None:
        super().__init__(result.reason)
        self.result = result


def _interrupted(state: dict[str, Any], settings: Settings) -> OptimizeResult:
    result = OptimizeResult.from_state(state, settings)  # type: ignore[arg-type]
    n = len(result.attempts)
    reason = f"interrupted (Ctrl-C) after {n} finished attempt{'s' if n != 1 else ''}"
    return replace(result, status="verified" if result.best_source is not None else "interrupted", reason=reason)


def _resume_input(graph: Any, config: dict[str, Any], settings: Settings, thread_id: str | None) -> None:
    """Prepare a saved thread to continue; the graph's input is then None (LangGraph's resume)."""
    from tritonsmith.graphs.routing import generated_count, target_reached
    from tritonsmith.graphs.state import Decision

    if "configurable" not in config or thread_id is None:
        raise ValueError("resume=True needs the checkpointer and the thread_id of the run to continue")
    snapshot = graph.get_state(config)
    if not snapshot.values:
        raise ValueError(f"no saved run under thread {thread_id!r} in this checkpointer")
    values = snapshot.values
    if snapshot.next or values.get("exhausted"):
        return None  # interrupted mid-step: LangGraph re-runs what was left; or nothing more to try
    done, _ = target_reached(values.get("best"), settings)
    if not done and generated_count(values.get("attempts", [])) < settings.iterations:
        log.info("resuming thread %s: iteration %d next", thread_id, generated_count(values["attempts"]) + 1)
        graph.update_state(config, {"decision": Decision(action="refine", reason="resumed")}, as_node="decide")
    return None


def _read_kernel(value: str | Path) -> str:
    if isinstance(value, Path) or ("\n" not in value and value.endswith(".py")):
        path = Path(value)
        if not path.is_file():
            raise FileNotFoundError(f"kernel to start from not found: {path}")
        return path.read_text()
    return value


def _non_none(context: KernelContext | None) -> dict[str, Any]:
    if context is None:
        return {}
    return {k: v for k, v in asdict(context).items() if v is not None}


def __getattr__(name: str) -> Any:
    if name == "AttemptSummary":  # deprecated: one attempt type (its report view is Attempt.summary())
        warn_deprecated("tritonsmith.graphs.optimizer.AttemptSummary", "tritonsmith.core.results.Attempt")
        return Attempt
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
