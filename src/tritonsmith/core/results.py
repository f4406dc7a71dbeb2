"""Typed results of an evaluation, and the attempt that carries one. Plain dataclasses that round-trip
through JSON.

Every layer reads these (the evaluator writes them; memory, tools, agents, graphs, suite and the CLI read
them), so they live in ``core`` and import nothing of tritonsmith but the feedback formatter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tritonsmith.core._feedback import format_feedback


class EvalStatus(StrEnum):
    """What happened to a candidate. Only ``CORRECT`` earns a reward."""

    CORRECT = "correct"
    WRONG_OUTPUT = "wrong_output"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """Why one output of one trial failed the tolerance check."""

    trial: int
    output_index: int
    message: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatched: int | None = None
    total: int | None = None
    nan_count: int | None = None
    inf_count: int | None = None
    first_bad_index: tuple[int, ...] | None = None
    candidate_value: float | None = None
    reference_value: float | None = None
    kind: str | None = None  # "values", or a structural error: "shape", "dtype", "device", "type", "count"
    pattern: dict[str, Any] | None = None  # what the wrong values look like (see tools/_compare.mismatch_pattern)


@dataclass(frozen=True, kw_only=True)
class CorrectnessReport:
    trials: int
    passed: int
    tolerance: str
    max_abs_error: float
    max_rel_error: float
    mismatch: Mismatch | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Median and spread of one implementation's runtime, in milliseconds (CUDA events).

    ``ci_low_ms``/``ci_high_ms``: a 95% confidence interval of the median. ``launch_ms``: the host time
    a call takes to return (Python and launch latency), which the events leave out.
    """

    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    host_median_ms: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    launch_ms: float | None = None

    @property
    def spread(self) -> float:
        """(p80 - p20) / median: the run-to-run noise of this figure."""
        return (self.p80_ms - self.p20_ms) / self.median_ms if self.median_ms > 0 else 0.0


@dataclass(frozen=True, kw_only=True)
class BenchmarkReport:
    """Candidate, eager reference and ``torch.compile`` reference, timed in one worker.

    ``speedup_ci_vs_*``: 95% intervals of the speedups (from the medians' intervals); ``light_floor_ms``:
    reading the inputs and writing the outputs once at the GPU's peak bandwidth.
    """

    candidate: Timing
    eager: Timing
    compiled: Timing | None
    compile_mode: str
    compiled_note: str | None = None
    remeasured: bool = False
    notes: tuple[str, ...] = ()
    light_floor_ms: float | None = None
    speedup_ci_vs_eager: tuple[float, float] | None = None
    speedup_ci_vs_compile: tuple[float, float] | None = None

    @property
    def speedup_vs_eager(self) -> float:
        return self.eager.median_ms / self.candidate.median_ms

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.compiled.median_ms / self.candidate.median_ms if self.compiled else None


@dataclass(frozen=True, kw_only=True)
class Violation:
    """One broken evaluator rule: ``rule`` is a stable identifier, ``message`` says what and why."""

    rule: str
    message: str
    line: int | None = None
    origin: str = "static"  # "static" (read from the source) or "runtime" (seen while it ran)


@dataclass(frozen=True, kw_only=True)
class TorchOpUse:
    """A PyTorch operation the candidate used to compute (not to allocate or reshape)."""

    op: str
    count: int = 1
    line: int | None = None
    origin: str = "static"


@dataclass(frozen=True, kw_only=True)
class ChecksReport:
    """What the anti-cheating checks looked at and found.

    ``policy`` is ``hybrid`` (PyTorch may keep some operations, listed in ``torch_ops``) or ``strict``
    (all compute in Triton). ``kernel_launches`` counts Triton launches in the first checked forward.
    """

    policy: str
    violations: tuple[Violation, ...] = ()
    torch_ops: tuple[TorchOpUse, ...] = ()
    kernels: tuple[str, ...] = ()
    kernel_launches: int | None = None
    notes: tuple[str, ...] = ()
    static_s: float = 0.0
    triton_share: float | None = None

    @property
    def passed(self) -> bool:
        return not self.violations


@dataclass(frozen=True, kw_only=True)
class EvalResult:
    """The evaluator's verdict on one candidate for one problem."""

    status: EvalStatus
    message: str
    problem: str
    device: str
    device_name: str
    tolerance: str
    error: str | None = None
    stage: str | None = None
    correctness: CorrectnessReport | None = None
    benchmark: BenchmarkReport | None = None
    timing_note: str | None = None
    scaling_note: str | None = None
    rule: str | None = None
    wall_s: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    candidate_path: str | None = None
    checks: ChecksReport | None = None
    # wall seconds per stage (they sum to wall_s); keys with a "/" are parts inside a stage (trial/compare)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    generalizes: str | None = None  # "yes" / "no" / "n/a" with the ``generalize`` option (``_generalize``)
    generalize_note: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is EvalStatus.CORRECT

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.benchmark.speedup_vs_compile if self.benchmark else None

    @property
    def speedup_vs_eager(self) -> float | None:
        return self.benchmark.speedup_vs_eager if self.benchmark else None

    def feedback(self, limit: int = 2500) -> str:
        """A concise account for the generator: what failed and where, or how fast it ran."""
        return format_feedback(self, limit=limit)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        d = dict(data)
        d["status"] = EvalStatus(d["status"])
        if d.get("correctness"):
            c = dict(d["correctness"])
            if c.get("mismatch"):
                m = dict(c["mismatch"])
                if m.get("first_bad_index") is not None:
                    m["first_bad_index"] = tuple(m["first_bad_index"])
                c["mismatch"] = Mismatch(**m)
            c["notes"] = tuple(c.get("notes", ()))
            d["correctness"] = CorrectnessReport(**c)
        if d.get("benchmark"):
            b = dict(d["benchmark"])
            for key in ("candidate", "eager", "compiled"):
                b[key] = Timing(**b[key]) if b.get(key) else None
            b["notes"] = tuple(b.get("notes", ()))
            for key in ("speedup_ci_vs_eager", "speedup_ci_vs_compile"):
                b[key] = tuple(b[key]) if b.get(key) else None
            d["benchmark"] = BenchmarkReport(**b)
        if d.get("checks"):
            d["checks"] = checks_from_dict(d["checks"])
        return cls(**d)


def checks_from_dict(data: dict[str, Any]) -> ChecksReport:
    c = dict(data)
    c["violations"] = tuple(Violation(**v) for v in c.get("violations", ()))
    c["torch_ops"] = tuple(TorchOpUse(**t) for t in c.get("torch_ops", ()))
    c["kernels"] = tuple(c.get("kernels", ()))
    c["notes"] = tuple(c.get("notes", ()))
    return ChecksReport(**c)


def to_jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, StrEnum):
        return value.value
    return value


NO_CODE = "no_code"  # an attempt's status when the generator produced no code
MODEL_ERROR = "model_error"  # the chat model failed (HTTP error, timeout, malformed reply): no code to judge
GENERATOR_ERROR = "error"  # our generator failed (its traceback is kept in ``Attempt.error``)

_SUMMARY_FIELDS = ("iteration", "generator", "status", "message", "reward", "reward_basis", "speedup", "source",
                   "note", "variant", "torch_ops", "error")
_TRAIL_MESSAGE = 300
_TRAIL_ERROR_LINES = 12
_TRAIL_ERROR_CHARS = 1500


def last_lines(text: str, n: int, limit: int | None = None) -> str | None:
    """The last ``n`` non-blank lines of an error text (where a traceback names what went wrong), at most
    ``limit`` characters; None when it holds none."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    tail = "\n".join(lines[-n:])
    return (tail if limit is None else tail[-limit:]) or None


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One candidate from generator to suite record: what was written, the verdict on it, and the feedback
    the generator saw. The one attempt type; readers that need fewer fields take a view.

    Before it is judged (the graph's ``pending`` candidate) only the generator's fields are set and
    ``status`` is ``""``. ``status`` is then an :class:`EvalStatus` value, :data:`NO_CODE`,
    :data:`MODEL_ERROR` (the chat model failed; ``model_error_fatal``: retrying cannot help) or
    :data:`GENERATOR_ERROR` (our generator failed: ``error`` holds its traceback). ``torch_ops``: the
    compute PyTorch did in a verified hybrid kernel. ``duplicate_of``: the iteration whose verdict an
    identical source reused.

    Views: :meth:`to_dict` (everything, JSON-able: the graph's state and checkpoints), :meth:`summary`
    (no evaluator result, feedback or profile: the optimize report) and :meth:`trail` (no source either,
    message cut: a suite's ``results.jsonl`` row). :meth:`from_dict` reads any of the three.
    """

    iteration: int
    source: str | None = None
    result: EvalResult | None = None
    feedback: str = ""
    reward: float = 0.0
    generator: str = ""
    variant: str | None = None
    status: str = ""
    message: str = ""
    reward_basis: str = ""
    speedup: float | None = None
    note: str = ""
    profile: str | None = None
    duplicate_of: int | None = None
    torch_ops: tuple[str, ...] = ()
    model_error: str | None = None
    model_error_fatal: bool = False
    error: str | None = None

    @property
    def judged(self) -> bool:
        return bool(self.status)

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-able (the evaluator's result as its own dict)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["result"] = self.result.to_dict() if self.result is not None else None
        return to_jsonable(data)

    def summary(self) -> dict[str, Any]:
        """What a report lists per attempt: the verdict and the code, without the evaluator's details."""
        return to_jsonable({name: getattr(self, name) for name in _SUMMARY_FIELDS})

    def trail(self) -> dict[str, Any]:
        """One attempt as a suite's results.jsonl row keeps it: what was tried and what the evaluator said,
        and, for a failed one, the end of its error text (a traceback, a compiler's or a dead worker's output:
        "the worker died" alone does not say why)."""
        row = {"iteration": self.iteration, "generator": self.generator, "variant": self.variant,
               "status": self.status, "speedup_vs_compile": self.speedup, "reward": round(self.reward, 4),
               "message": self.message[:_TRAIL_MESSAGE]}
        error = self.error or (self.result.error if self.result is not None else None)
        if error and self.reward <= 0.0 and (tail := last_lines(error, _TRAIL_ERROR_LINES, _TRAIL_ERROR_CHARS)):
            row["error"] = tail
        return row

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        """Read :meth:`to_dict`, :meth:`summary` or :meth:`trail` (or the older records of the same shapes:
        the graph's AttemptRecord and PendingCandidate, the optimize report's AttemptSummary)."""
        d = {k: v for k, v in data.items() if k in _FIELDS}
        if "speedup" not in d and "speedup_vs_compile" in data:  # a trail row
            d["speedup"] = data["speedup_vs_compile"]
        if d.get("result") is not None and not isinstance(d["result"], EvalResult):
            d["result"] = EvalResult.from_dict(d["result"])
        d["torch_ops"] = tuple(d.get("torch_ops") or ())
        d["model_error_fatal"] = bool(d.get("model_error_fatal"))
        for key in ("feedback", "generator", "message", "reward_basis", "note", "status"):
            if d.get(key) is None:
                d.pop(key, None)
        return cls(**d)


_FIELDS = frozenset(f.name for f in dataclasses.fields(Attempt))
