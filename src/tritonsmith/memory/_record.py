"""What the memory keeps about one evaluated kernel."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tritonsmith.core.contract import torch_computes
from tritonsmith.core.problem import Problem
from tritonsmith.core.results import EvalResult, EvalStatus
from tritonsmith.memory._signature import ProblemSignature, normalize_source, problem_key, problem_signature

__all__ = ["Evaluation", "KernelRecord", "Lineage", "RecordKind", "device_class", "record_from_eval", "record_id"]

SCHEMA_VERSION = 1


class RecordKind(StrEnum):
    """A success is a correct kernel to learn from; a lesson is a failed attempt kept for its error."""

    SUCCESS = "success"
    LESSON = "lesson"


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """The evaluator's verdict, flattened. Speedups are GPU measurements or None (never the CPU interpreter)."""

    status: str
    tolerance: str
    device: str
    device_name: str
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    runtime_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    message: str = ""
    error: str | None = None
    scaling_note: str | None = None
    torch_ops: tuple[str, ...] = ()  # compute PyTorch did (hybrid policy): not a pure-Triton example

    @property
    def measured(self) -> bool:
        return self.speedup_vs_eager is not None

    @property
    def hybrid(self) -> bool:
        """True when PyTorch computed part of the result (``torch_ops``), as the hybrid policy allows."""
        return bool(self.torch_ops)


@dataclass(frozen=True, kw_only=True)
class Lineage:
    parent_id: str | None = None
    iteration: int | None = None
    generator: str | None = None


@dataclass(frozen=True, kw_only=True)
class KernelRecord:
    """One kernel for one problem. ``id`` hashes the normalized kernel and problem sources (dedup key)."""

    id: str
    kind: RecordKind
    problem_name: str
    problem_source: str
    signature: str
    kernel_source: str
    evaluation: Evaluation
    problem_level: int | None = None
    lineage: Lineage = field(default_factory=Lineage)
    created_at: float = field(default_factory=time.time)
    origin: str = "run"
    tags: tuple[str, ...] = ()

    @property
    def problem_key(self) -> str:
        return problem_key(self.problem_source)

    @property
    def device_class(self) -> str:
        return device_class(self.evaluation.device_name)

    @property
    def ops(self) -> tuple[str, ...]:
        return ProblemSignature.from_text(self.signature).ops

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["kind"] = self.kind.value
        d["tags"] = list(self.tags)
        d["schema"] = SCHEMA_VERSION
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelRecord:
        d = {k: v for k, v in data.items() if k != "schema"}
        d["kind"] = RecordKind(d["kind"])
        d["evaluation"] = Evaluation(**{**d["evaluation"], "torch_ops": tuple(d["evaluation"].get("torch_ops", ()))})
        d["lineage"] = Lineage(**(d.get("lineage") or {}))
        d["tags"] = tuple(d.get("tags", ()))
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> KernelRecord:
        return cls.from_dict(json.loads(text))

    def metadata(self) -> dict[str, str | int | float | bool]:
        """Flat fields a store filters on (Chroma metadata: scalars only, no None)."""
        meta: dict[str, str | int | float | bool] = {
            "kind": self.kind.value, "status": self.evaluation.status, "problem_name": self.problem_name,
            "problem_key": self.problem_key, "device_class": self.device_class,
            "device_name": self.evaluation.device_name, "created_at": self.created_at, "origin": self.origin,
            "generator": self.lineage.generator or "", "measured": self.evaluation.measured,
            "hybrid": self.evaluation.hybrid,
            "record": self.to_json(),
        }
        for name in ("speedup_vs_eager", "speedup_vs_compile", "runtime_ms"):
            value = getattr(self.evaluation, name)
            if value is not None:
                meta[name] = float(value)
        if self.problem_level is not None:
            meta["level"] = int(self.problem_level)
        return meta


def record_id(problem_source: str, kernel_source: str) -> str:
    """Deterministic id: the same kernel for the same problem (modulo comments and formatting) gets one id."""
    h = hashlib.sha256()
    h.update(problem_key(problem_source).encode())
    h.update(b"\0")
    h.update(normalize_source(kernel_source).encode())
    return h.hexdigest()[:32]


_CLASSES = (
    (r"\b(h100|h200|h800|gh200|h20)\b", "hopper"),
    (r"\b(b100|b200|gb200|b300)\b", "blackwell"),
    (r"\b(a100|a800|a10g?|a30|a40|a6000|rtx 30\d\d)\b", "ampere"),
    (r"\b(l4|l40s?|rtx 40\d\d|rtx 6000 ada)\b", "ada"),
    (r"\b(v100)\b", "volta"),
    (r"\b(t4)\b", "turing"),
    (r"\b(mi2\d\d|mi3\d\d)\b", "cdna"),
)


def device_class(device_name: str) -> str:
    """``NVIDIA H200`` -> ``hopper``; ``cpu`` -> ``cpu``; unknown GPUs keep their lower-cased name."""
    name = device_name.lower().replace("nvidia", "").strip()
    if not name or name == "cpu" or "cpu" in name:
        return "cpu"
    for pattern, cls in _CLASSES:
        if re.search(pattern, name):
            return cls
    return re.sub(r"\s+", "-", name)


def record_from_eval(
    problem: Problem,
    kernel_source: str,
    result: EvalResult,
    *,
    parent_id: str | None = None,
    iteration: int | None = None,
    generator: str | None = None,
    origin: str = "run",
    tags: tuple[str, ...] = (),
    signature: ProblemSignature | None = None,
) -> KernelRecord:
    """Build the record of one evaluated candidate. Correct -> success, anything else -> lesson.

    Speedups and runtimes are kept only from a GPU run: an interpreter timing is not a measurement.
    """
    bench = result.benchmark if result.device.startswith("cuda") else None
    ev = Evaluation(
        status=result.status.value, tolerance=result.tolerance, device=result.device, device_name=result.device_name,
        speedup_vs_eager=bench.speedup_vs_eager if bench else None,
        speedup_vs_compile=bench.speedup_vs_compile if bench else None,
        runtime_ms=bench.candidate.median_ms if bench else None,
        eager_ms=bench.eager.median_ms if bench else None,
        compile_ms=bench.compiled.median_ms if bench and bench.compiled else None,
        torch_version=result.versions.get("torch"), triton_version=result.versions.get("triton"),
        message=result.message[:2000], error=(result.error or None) and result.error[:4000],
        scaling_note=result.scaling_note, torch_ops=torch_computes(result.checks),
    )
    sig = signature or problem_signature(problem)
    kind = RecordKind.SUCCESS if result.status is EvalStatus.CORRECT else RecordKind.LESSON
    return KernelRecord(
        id=record_id(problem.source, kernel_source), kind=kind, problem_name=problem.name,
        problem_source=problem.source, signature=sig.text, kernel_source=kernel_source, evaluation=ev,
        problem_level=problem.level, lineage=Lineage(parent_id=parent_id, iteration=iteration, generator=generator),
        origin=origin, tags=tags,
    )
