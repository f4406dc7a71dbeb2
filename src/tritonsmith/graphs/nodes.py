"""The graph's nodes: analyze -> retrieve -> generate -> evaluate -> profile -> decide (-> remember).

Each node reads the run's settings (argument > run context > environment > default), does one thing,
returns a partial state update, and emits a progress event on the ``custom`` stream.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import traceback
from pathlib import Path
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from tritonsmith.agents.base import Candidate, GenerationRequest, Generator
from tritonsmith.core.device import DEFAULT_DEVICE, resolve_device
from tritonsmith.core.settings import KernelContext, Settings
from tritonsmith.graphs import routing
from tritonsmith.graphs._analysis import analyze_problem, explain_failure
from tritonsmith.graphs._resolve import GraphDeps
from tritonsmith.graphs.reward import reward_for
from tritonsmith.graphs.state import (
    GENERATOR_ERROR,
    MODEL_ERROR,
    NO_CODE,
    AttemptRecord,
    KernelState,
    ProblemSpec,
    Usage,
)
from tritonsmith.core.problem import Problem, load_problem
from tritonsmith.core.results import Attempt, EvalResult
from tritonsmith.tools.ports import VariantCache

__all__ = ["KernelNodes", "NODE_NAMES", "problem_from_spec", "spec_from_problem"]

log = logging.getLogger(__name__)

NODE_NAMES = ("analyze", "retrieve", "generate", "evaluate", "profile", "decide", "remember")
USER = "user"
STORE_NAMESPACE = ("tritonsmith", "kernels")


def spec_from_problem(problem: Problem | ProblemSpec | str | Path) -> ProblemSpec:
    """A JSON-able description of a problem (path, source, :class:`Problem` or spec)."""
    if isinstance(problem, dict):
        return problem
    p = load_problem(problem)
    return ProblemSpec(source=p.source, name=p.name, level=p.level, path=str(p.path) if p.path else None,
                       weights_path=str(p.weights_path) if p.weights_path else None)


def problem_from_spec(spec: ProblemSpec | str) -> Problem:
    if isinstance(spec, str):
        return load_problem(spec)
    weights = spec.get("weights_path")
    path = spec.get("path")
    return Problem(source=spec["source"], name=spec["name"], level=spec.get("level"),
                   path=Path(path) if path else None, weights_path=Path(weights) if weights else None)


class KernelNodes:
    """The node functions, bound to what ``build_kernel_graph`` was given."""

    def __init__(self, deps: GraphDeps) -> None:
        self.deps = deps

    def _settings(self, runtime: Runtime[KernelContext]) -> Settings:
        return self.deps.settings(runtime.context)

    # -- analyze --------------------------------------------------------------------------------
    def analyze(self, state: KernelState, runtime: Runtime[KernelContext]) -> dict[str, Any]:
        """Normalise the problem, resolve the device, and describe the op: signature, FLOPs, bytes, bound."""
        settings = self._settings(runtime)
        spec = spec_from_problem(state["problem"])
        problem = problem_from_spec(spec)
        device = resolve_device(settings.device)
        text, facts = analyze_problem(problem)
        if settings.scale and (scaled := problem.scaled().scaling_note):
            # the evaluator runs the scaled problem: the model must not size its kernel for the original only
            text = f"{text}\nevaluated at reduced sizes: {scaled}; write the kernel for any size"
        notes = []
        if device == "cpu":
            notes.append("device: CPU (Triton interpreter): correctness is checked, speed is not measured; "
                         "a correct kernel gets reward 0.5 ('correct, speed unmeasured')")
        _emit(runtime, event="analyzed", problem=spec["name"], device=device, bound=facts.get("bound"))
        return {"problem": spec, "analysis": text, "facts": facts, "device": device, "notes": notes}

    # -- retrieve -------------------------------------------------------------------------------
    def retrieve(self, state: KernelState, runtime: Runtime[KernelContext]) -> dict[str, Any]:
        """Similar verified kernels from the memory (none without a memory)."""
        settings = self._settings(runtime)
        store = self.deps.store(settings)
        if store is None:
            note = self.deps.store_note(settings)
            return {"examples": [], **({"notes": [note]} if note else {})}
        problem = problem_from_spec(state["problem"])
        device_name = _cuda_name() if _device(state) == "cuda" else None
        hits = store.similar(problem, k=3, device_name=device_name)
        examples = [f"# {h.problem_name} ({h.reason})\n{h.source.strip()}\n" for h in hits]
        tuned = store.tuned_variants(problem, device_name=device_name) \
            if device_name and isinstance(store, VariantCache) else []
        _emit(runtime, event="retrieved", count=len(examples), problems=[h.problem_name for h in hits],
              tuned_variants=tuned)
        return {"examples": examples, "tuned_variants": tuned}

    # -- generate -------------------------------------------------------------------------------
    def generate(self, state: KernelState, runtime: Runtime[KernelContext]) -> dict[str, Any]:
        """The next candidate: the user's kernel first (``start_from``), then the generator's."""
        attempts = state.get("attempts", [])
        start = state.get("start_from")
        if start and not any(a["generator"] == USER for a in attempts):
            pending = Attempt(iteration=0, source=start, generator=USER, note="the user's kernel").to_dict()
            _emit(runtime, event="generated", iteration=0, generator=USER, has_code=True)
            return {"pending": pending}
        settings = self._settings(runtime)
        generator, note = self.deps.generator_for(settings)
        iteration = max((a["iteration"] for a in attempts), default=0) + 1
        request = GenerationRequest(
            problem=problem_from_spec(state["problem"]), iteration=iteration,
            history=[Attempt.from_dict(a) for a in attempts if a["status"] != MODEL_ERROR],
            examples=tuple(state.get("examples", ())), analysis=state.get("analysis", ""), device=_device(state),
            start_from=start, policy=settings.policy, scale=settings.scale,
            tuned_variants=tuple(state.get("tuned_variants", ())),
            iterations_left=max(0, settings.iterations - routing.generated_count(attempts) - 1))
        log.info("iteration %d: asking the %s generator", iteration, generator.name)
        candidate = _generate_safely(generator, request)
        u = candidate.usage
        usage = Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens, cost_usd=u.cost_usd,
                      calls=1 if generator.name == "llm" else 0)
        pending = Attempt(iteration=iteration, source=candidate.source, generator=generator.name, note=candidate.note,
                          variant=candidate.variant, error=candidate.error, model_error=candidate.model_error,
                          model_error_fatal=candidate.model_error_fatal).to_dict()
        _emit(runtime, event="generated", iteration=iteration, generator=generator.name,
              has_code=candidate.source is not None, tokens=u.input_tokens + u.output_tokens,
              **({"error": candidate.note} if candidate.error else {}))
        update: dict[str, Any] = {"pending": pending, "usage": usage, "generator": generator.name,
                                  "exhausted": candidate.exhausted}
        if note and note not in state.get("notes", []):  # once per run, not once per iteration
            log.warning("%s", note)
            update["notes"] = [note]
        return update

    # -- evaluate -------------------------------------------------------------------------------
    def evaluate(self, state: KernelState, runtime: Runtime[KernelContext]) -> dict[str, Any]:
        """Run the evaluator on the pending candidate (an identical earlier candidate reuses its verdict)."""
        pending = state["pending"]
        if pending is None:
            raise RuntimeError("evaluate ran without a pending candidate (graph wiring error)")
        tried = Attempt.from_dict(pending)
        if tried.source is None:
            rec = _record(tried, None, feedback=tried.note or "no code")
        else:
            rec = self._evaluate_source(state, tried, self._settings(runtime))
        _emit(runtime, event="evaluated", iteration=rec["iteration"], generator=rec["generator"],
              status=rec["status"], message=rec["message"], speedup=rec["speedup"],
              reward=rec["reward"], reward_basis=rec["reward_basis"], torch_ops=rec.get("torch_ops", []))
        return _with_best({"attempts": [rec], "pending": None}, rec)

    def _evaluate_source(self, state: KernelState, pending: Attempt, settings: Settings) -> AttemptRecord:
        source = pending.source or ""
        twin = next((a for a in state.get("attempts", []) if a["source"] and a["source"].strip() == source.strip()
                     and a["result"] is not None), None)
        if twin is not None:
            result = EvalResult.from_dict(twin["result"])
            return _record(pending, result, feedback=f"identical to iteration {twin['iteration']}: "
                                                     f"{result.feedback()}", duplicate_of=twin["iteration"])
        result = self.deps.evaluate_fn()(
            problem_from_spec(state["problem"]), source, device=_device(state), trials=settings.trials,
            tolerance=settings.tolerance, policy=settings.policy, timeout_s=settings.eval_timeout_s,
            scale=settings.scale)
        return _record(pending, result, feedback=result.feedback())

    # -- profile --------------------------------------------------------------------------------
    def profile(self, state: KernelState, runtime: Runtime[KernelContext]) -> dict[str, Any]:
        """Profile a correct attempt that will be refined (on a GPU); explain a failed one. Either way, enrich
        its feedback."""
        rec = dict(state["attempts"][-1])
        # A profile only informs the next generation: none follows the last iteration (on a GPU it costs
        # ~20 s of torch.compile and ncu per attempt).
        settings = self._settings(runtime)
        if rec["reward"] > 0 and settings.profile and routing.decide(state, settings)["action"] == "refine":
            findings = self._profile(state, rec)
            if findings:
                rec["profile"] = findings
                rec["feedback"] = f"{rec['feedback']}\n\nprofiler:\n{findings}"
        else:
            rec["feedback"] = f"{rec['feedback']}\n\nhint: {explain_failure(rec)}"  # type: ignore[arg-type]
        _emit(runtime, event="profiled", iteration=rec["iteration"], profiled=bool(rec.get("profile")))
        return _with_best({"attempts": [rec]}, rec)  # type: ignore[arg-type]

    def _profile(self, state: KernelState, rec: dict[str, Any]) -> str | None:
        profiler = self.deps.profiler_fn()
        if profiler is None:
            return None
        if _device(state) != "cuda":
            return None  # the profiler times kernels: nothing to learn on the interpreter
        return profiler(problem_from_spec(state["problem"]), rec["source"], device="cuda")

    # -- decide / remember ----------------------------------------------------------------------
    def decide(self, state: KernelState, runtime: Runtime[KernelContext]) -> dict[str, Any]:
        decision = routing.decide(state, self._settings(runtime))
        _emit(runtime, event="decided", action=decision["action"], reason=decision["reason"])
        return {"decision": decision}

    def remember(self, state: KernelState, runtime: Runtime[KernelContext]) -> dict[str, Any]:
        """Store every verified kernel of this run in the kernel memory (and the LangGraph store, if any)."""
        verified = [a for a in state.get("attempts", []) if a["reward"] > 0 and a.get("duplicate_of") is None]
        store = self.deps.store(self._settings(runtime))
        problem = problem_from_spec(state["problem"])
        ids: list[str] = []
        for a in verified:
            if store is not None:
                rid = store.remember(problem, a["source"] or "", EvalResult.from_dict(a["result"] or {}),
                                     iteration=a["iteration"], generator=a["generator"])
                if rid:
                    ids.append(rid)
            if runtime.store is not None:
                key = hashlib.sha256((a["source"] or "").encode()).hexdigest()[:16]
                runtime.store.put((*STORE_NAMESPACE, problem.name), key,
                                  {"source": a["source"], "status": a["status"], "reward": a["reward"],
                                   "speedup": a["speedup"], "iteration": a["iteration"]})
        _emit(runtime, event="remembered", verified=len(verified), stored=len(ids))
        return {"remembered": ids}


_OUTAGE_MODULES = ("openai", "httpx", "httpcore", "anthropic", "requests", "urllib3", "aiohttp")


def _is_outage(exc: BaseException) -> bool:
    """A model server or network failure: it stops the run, which resumes from its checkpoint later."""
    return isinstance(exc, (ConnectionError, TimeoutError, OSError)) or any(
        type(exc).__module__.startswith(m) for m in _OUTAGE_MODULES)


def _generate_safely(generator: Generator, request: GenerationRequest) -> Candidate:
    """The generator's candidate; a generator that raises (a bug, not an outage) gives an ``error`` candidate
    with its traceback instead, so the loop records it and goes on with the next iteration."""
    try:
        return generator.generate(request)
    except GraphBubbleUp:  # LangGraph's own control flow (an interrupt in the LLM subgraph): not a failure
        raise
    except Exception as exc:  # a generator bug must never escape the loop unrecorded: it becomes an attempt
        if _is_outage(exc):
            raise
        log.exception("the %s generator failed on %s", generator.name, request.problem.name)
        return Candidate(source=None, note=f"{generator.name} generator failed: {type(exc).__name__}: {exc}"[:500],
                         error=traceback.format_exc(limit=20))


def _record(pending: Attempt | AttemptRecord, result: EvalResult | None, *, feedback: str,
            duplicate_of: int | None = None) -> AttemptRecord:
    """The pending attempt judged: ``result`` (None: it had no code, or a model or generator error)."""
    if isinstance(pending, dict):
        pending = Attempt.from_dict(pending)
    reward = reward_for(result)
    failed = GENERATOR_ERROR if pending.error else MODEL_ERROR if pending.model_error else NO_CODE
    judged = dataclasses.replace(
        pending, status=result.status.value if result else failed,
        message=_headline(result) if result else (pending.note or "the generator produced no code"),
        result=result, feedback=feedback, reward=reward.value, reward_basis=reward.basis, speedup=reward.speedup,
        torch_ops=tuple(reward.torch_ops), duplicate_of=duplicate_of,
        model_error_fatal=bool(pending.model_error and pending.model_error_fatal))
    return judged.to_dict()


def _headline(result: EvalResult) -> str:
    """The verdict in one line: the evaluator's message, and for a candidate that failed to compile, import
    or run, the error's type and message and the candidate's line it points at."""
    message = result.message
    if result.status.value not in ("compile_error", "runtime_error") or not result.error:
        return message
    lines = result.error.splitlines()
    first = lines[0].strip()
    where = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith("candidate line")), "")
    parts = [message] + [p for p in (first, where) if p and p not in message]
    return ": ".join(parts[:2]) + (f" ({parts[2]})" if len(parts) > 2 else "")


def _with_best(update: dict[str, Any], rec: AttemptRecord) -> dict[str, Any]:
    """Offer ``rec`` as the best only when verified: a channel's first write bypasses its reducer."""
    if rec["reward"] > 0:
        update["best"] = rec
    return update


def _device(state: KernelState) -> str:
    """The run's device: resolved once, by ``analyze``, from ``Settings.device``. A state that did not pass
    through ``analyze`` (a node run on its own) gets the one default, :data:`DEFAULT_DEVICE` (``auto``)."""
    return state.get("device") or resolve_device(DEFAULT_DEVICE)


def _emit(runtime: Runtime[Any], **event: Any) -> None:
    runtime.stream_writer(event)


def _cuda_name() -> str | None:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else None
