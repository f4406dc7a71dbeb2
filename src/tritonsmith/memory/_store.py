"""The store interface, ranking, and an in-memory implementation (for tests and for users who want no files)."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction

from tritonsmith.core.problem import Problem, ProblemError, validate_source
from tritonsmith.memory._dominant import dominant_class, op_affinity
from tritonsmith.memory._embed import embed, short_name
from tritonsmith.memory._record import KernelRecord, ProblemSignature, RecordKind, device_class
from tritonsmith.memory._signature import problem_key, problem_signature, retrieval_text

# the built-in generator's module header names its variant: "Variant: mm-128x128 (why ...)"
_VARIANT_LINE = re.compile(r"^Variant: ([\w.+-]+)", re.MULTILINE)

__all__ = ["AddResult", "InMemoryKernelMemory", "KernelMemory", "MemoryStats", "SearchFilters", "SearchHit"]

log = logging.getLogger(__name__)

PERF_WEIGHT = 0.04  # score added per doubling of speedup on the same device class (capped at 4 doublings)
_BATCH = 500


@dataclass(frozen=True, kw_only=True)
class SearchFilters:
    """Restrict a search or a listing. ``None`` means "any"."""

    kind: RecordKind | None = None
    device_class: str | None = None
    level: int | None = None
    problem_name: str | None = None
    problem_key: str | None = None
    exclude_problem_key: str | None = None
    exclude_ids: tuple[str, ...] = ()
    min_speedup: float | None = None
    generator: str | None = None
    origin: str | None = None
    measured_only: bool = False
    pure_triton_only: bool = False  # leave out hybrid kernels (PyTorch computed part of their result)

    def clauses(self) -> list[dict[str, Any]]:
        """Chroma ``where`` clauses (ids are excluded after the query)."""
        c: list[dict[str, Any]] = []
        for key, value in (("kind", self.kind and self.kind.value), ("device_class", self.device_class),
                           ("level", self.level), ("problem_name", self.problem_name),
                           ("problem_key", self.problem_key), ("generator", self.generator), ("origin", self.origin)):
            if value is not None:
                c.append({key: {"$eq": value}})
        if self.exclude_problem_key is not None:
            c.append({"problem_key": {"$ne": self.exclude_problem_key}})
        if self.min_speedup is not None:
            c.append({"speedup_vs_eager": {"$gte": float(self.min_speedup)}})
        if self.measured_only:
            c.append({"measured": {"$eq": True}})
        return c

    def matches(self, r: KernelRecord) -> bool:
        ev = r.evaluation
        checks = (
            self.kind is None or r.kind is self.kind,
            self.device_class is None or r.device_class == self.device_class,
            self.level is None or r.problem_level == self.level,
            self.problem_name is None or r.problem_name == self.problem_name,
            self.problem_key is None or r.problem_key == self.problem_key,
            self.exclude_problem_key is None or r.problem_key != self.exclude_problem_key,
            r.id not in self.exclude_ids,
            self.min_speedup is None or (ev.speedup_vs_eager is not None and ev.speedup_vs_eager >= self.min_speedup),
            self.generator is None or r.lineage.generator == self.generator,
            self.origin is None or r.origin == self.origin,
            not self.measured_only or ev.measured,
            not self.pure_triton_only or not ev.hybrid,
        )
        return all(checks)


@dataclass(frozen=True, kw_only=True)
class AddResult:
    id: str
    status: Literal["added", "duplicate", "replaced"]


@dataclass(frozen=True, kw_only=True)
class SearchHit:
    """One retrieved kernel: ``score`` = ``similarity`` + a bonus for measured speed on the same device class."""

    record: KernelRecord
    similarity: float
    score: float
    reason: str


@dataclass(frozen=True, kw_only=True)
class MemoryStats:
    location: str
    embedder: str
    total: int
    successes: int
    lessons: int
    problems: int
    by_device_class: dict[str, int] = field(default_factory=dict)
    by_origin: dict[str, int] = field(default_factory=dict)


def _better(new: KernelRecord, old: KernelRecord) -> bool:
    """Replace a duplicate only when the new copy knows strictly more."""
    if new.kind is RecordKind.SUCCESS and old.kind is RecordKind.LESSON:
        return True
    return new.kind is old.kind and new.evaluation.measured and not old.evaluation.measured


class KernelMemory(ABC):
    """Verified kernels and lessons, searchable by problem similarity and measured speed.

    Backends implement the ``_``-methods; dedup, ranking, export and import live here.
    """

    embedder: EmbeddingFunction[Documents]
    location: str

    # -- backend primitives ---------------------------------------------------------------------
    @abstractmethod
    def _write(self) -> Any:
        """Context manager: exclusive, up-to-date access for a read-modify-write."""

    @abstractmethod
    def _upsert(self, records: Sequence[KernelRecord], texts: Sequence[str], vectors: Sequence[list[float]]) -> None: ...

    @abstractmethod
    def _get(self, ids: Sequence[str]) -> list[KernelRecord]: ...

    @abstractmethod
    def _scan(self, filters: SearchFilters, limit: int | None) -> list[KernelRecord]: ...

    @abstractmethod
    def _nearest(self, vector: list[float], n: int, filters: SearchFilters) -> list[tuple[KernelRecord, float]]:
        """Up to ``n`` records matching ``filters`` with their cosine distances, nearest first."""

    @abstractmethod
    def _delete(self, ids: Sequence[str]) -> None: ...

    @abstractmethod
    def count(self) -> int: ...

    # -- public API ------------------------------------------------------------------------------
    def add(self, record: KernelRecord) -> AddResult:
        """Store one record; the same kernel for the same problem is stored once (see :class:`AddResult`)."""
        return self.add_many([record])[0]

    def add_many(self, records: Iterable[KernelRecord]) -> list[AddResult]:
        results: list[AddResult] = []
        batch = list(records)
        for start in range(0, len(batch), _BATCH):
            chunk = batch[start:start + _BATCH]
            texts = [retrieval_text(ProblemSignature.from_text(r.signature), r.problem_source, r.kernel_source,
                                    tags=r.tags) for r in chunk]
            vectors = embed(self.embedder, texts)  # outside the lock: embedding is the slow part
            with self._write():
                existing = {r.id: r for r in self._get(list(dict.fromkeys(r.id for r in chunk)))}
                keep: dict[str, tuple[KernelRecord, str, list[float]]] = {}
                for rec, text, vec in zip(chunk, texts, vectors, strict=True):
                    old = keep.get(rec.id, (existing.get(rec.id), "", []))[0]
                    if old is None or _better(rec, old):
                        keep[rec.id] = (rec, text, vec)
                        results.append(AddResult(id=rec.id, status="added" if old is None else "replaced"))
                    else:
                        results.append(AddResult(id=rec.id, status="duplicate"))
                if keep:
                    recs, txts, vecs = zip(*keep.values(), strict=True)
                    self._upsert(list(recs), list(txts), list(vecs))
        return results

    def get(self, record_id: str) -> KernelRecord | None:
        found = self._get([record_id])
        return found[0] if found else None

    def list(self, filters: SearchFilters | None = None, *, limit: int | None = None) -> list[KernelRecord]:
        """Records matching ``filters``, newest first."""
        recs = self._scan(filters or SearchFilters(), None)
        recs.sort(key=lambda r: r.created_at, reverse=True)
        return recs[:limit] if limit is not None else recs

    def tuned_variants(self, problem_source: str, device_name: str) -> list[str]:
        """The built-in generator's variants (``Variant:`` in a kernel's header) that were verified and timed for
        exactly this problem (same normalized source, so the same shapes) on ``device_name``'s class, fastest
        against torch.compile first: a per-shape tuning cache, so a second run of a shape starts from the
        configuration the first one measured best instead of searching again."""
        found = self.list(SearchFilters(kind=RecordKind.SUCCESS, problem_key=problem_key(problem_source),
                                        device_class=device_class(device_name), generator="builtin",
                                        measured_only=True))
        found.sort(key=lambda r: r.evaluation.speedup_vs_compile or r.evaluation.speedup_vs_eager or 0.0, reverse=True)
        keys = (_VARIANT_LINE.search(r.kernel_source) for r in found)
        return list(dict.fromkeys(m.group(1) for m in keys if m))

    def delete(self, ids: Sequence[str]) -> int:
        with self._write():
            present = [r.id for r in self._get(list(ids))]
            if present:
                self._delete(present)
        return len(present)

    def search(
        self,
        query: str | Problem,
        *,
        k: int = 3,
        filters: SearchFilters | None = None,
        device_name: str | None = None,
        one_per_problem: bool = True,
    ) -> list[SearchHit]:
        """The ``k`` most useful successes for ``query`` (a problem, its source, or free text).

        Lessons are never returned. With ``device_name``, kernels measured fast on the same device class
        rank higher. ``one_per_problem`` keeps only the best kernel of each problem.
        """
        text, query_ops = self._query_text(query)
        base = filters or SearchFilters()
        filt = dataclasses.replace(base, kind=RecordKind.SUCCESS)
        n = max(4 * k, 20) + len(filt.exclude_ids)
        vector = embed(self.embedder, [text])[0]
        pairs = [(r, d) for r, d in self._nearest(vector, n, filt) if r.id not in filt.exclude_ids
                 and not (filt.pure_triton_only and r.evaluation.hybrid)]
        return rank(pairs, k=k, target_class=device_class(device_name) if device_name else None,
                    query_ops=query_ops, one_per_problem=one_per_problem)

    def export_records(self, path: str | Path, filters: SearchFilters | None = None) -> int:
        """Write matching records as JSON lines (oldest first); returns how many."""
        recs = sorted(self._scan(filters or SearchFilters(), None), key=lambda r: (r.created_at, r.id))
        tmp = Path(f"{path}.tmp")
        with tmp.open("w") as fh:
            for r in recs:
                fh.write(r.to_json() + "\n")
        tmp.replace(path)
        return len(recs)

    def import_records(self, path: str | Path) -> list[AddResult]:
        """Add the records of a JSON-lines export (re-embedded with this store's embedder)."""
        return self.add_many(_read_jsonl(Path(path)))

    def stats(self) -> MemoryStats:
        recs = self._scan(SearchFilters(), None)
        kinds = Counter(r.kind for r in recs)
        return MemoryStats(
            location=self.location, embedder=short_name(self.embedder), total=len(recs),
            successes=kinds[RecordKind.SUCCESS], lessons=kinds[RecordKind.LESSON],
            problems=len({r.problem_key for r in recs}),
            by_device_class=dict(Counter(r.device_class for r in recs)), by_origin=dict(Counter(r.origin for r in recs)),
        )

    def _query_text(self, query: str | Problem) -> tuple[str, tuple[str, ...]]:
        if isinstance(query, str):
            try:
                validate_source(query, origin="query")
            except ProblemError:
                return query, ()
            query = Problem.from_source(query, name="query")
        sig = problem_signature(query)
        return retrieval_text(sig, query.source), sig.ops


def _read_jsonl(path: Path) -> Iterator[KernelRecord]:
    with path.open() as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield KernelRecord.from_dict(json.loads(line))
                except (ValueError, TypeError, KeyError) as exc:
                    raise ValueError(f"{path}:{n}: not a kernel record ({exc})") from exc


def rank(
    pairs: Sequence[tuple[KernelRecord, float]],
    *,
    k: int,
    target_class: str | None,
    query_ops: Sequence[str] = (),
    one_per_problem: bool = True,
) -> list[SearchHit]:
    """Order by similarity, plus a bonus when the record's dominant op class is the query's (a matmul for a
    matmul, a row reduction for a row reduction: see ``_dominant``), plus a capped bonus for measured
    speed on ``target_class``."""
    hits: list[SearchHit] = []
    query_class = dominant_class(query_ops) if query_ops else None
    for rec, dist in pairs:
        sim = 1.0 - float(dist)
        bonus, perf = 0.0, _perf_text(rec, target_class)
        speed = rec.evaluation.speedup_vs_eager
        if target_class and speed and rec.device_class == target_class:
            bonus = PERF_WEIGHT * max(-1.0, min(4.0, math.log2(speed)))
        rec_class = dominant_class(rec.ops)
        bonus += op_affinity(query_ops, rec.ops)
        shared = [op for op in dict.fromkeys(query_ops) if op in set(rec.ops)][:6]
        why = (f"similarity {sim:.2f}" + (f"; {rec_class}, as this problem" if query_class and rec_class == query_class
                                          else "") + (f"; shared ops: {', '.join(shared)}" if shared else "") + perf)
        hits.append(SearchHit(record=rec, similarity=sim, score=sim + bonus, reason=why))
    hits.sort(key=lambda h: h.score, reverse=True)
    if one_per_problem:
        seen: set[str] = set()
        unique = []
        for h in hits:
            if h.record.problem_key not in seen:
                seen.add(h.record.problem_key)
                unique.append(h)
        hits = unique
    return hits[:k]


def _perf_text(rec: KernelRecord, target_class: str | None) -> str:
    ev = rec.evaluation
    if ev.speedup_vs_eager is None:
        return "; correct, speed not measured on a GPU"
    vs_c = f", {ev.speedup_vs_compile:.2f}x vs torch.compile" if ev.speedup_vs_compile else ""
    same = "" if target_class is None else (" (same device class)" if rec.device_class == target_class
                                            else " (other device class)")
    return f"; {ev.speedup_vs_eager:.2f}x vs eager{vs_c} on {ev.device_name}{same}"


class InMemoryKernelMemory(KernelMemory):
    """The same interface held in a dict; nothing touches the disk. Thread-safe."""

    def __init__(self, embedder: EmbeddingFunction[Documents] | None = None) -> None:
        from tritonsmith.memory._embed import StructuralEmbedding

        self.embedder = embedder or StructuralEmbedding()
        self.location = "memory"
        self._records: dict[str, tuple[KernelRecord, np.ndarray]] = {}
        self._lock = threading.RLock()

    @contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock:
            yield

    def _upsert(self, records: Sequence[KernelRecord], texts: Sequence[str], vectors: Sequence[list[float]]) -> None:
        for r, v in zip(records, vectors, strict=True):
            self._records[r.id] = (r, np.asarray(v, dtype=np.float32))

    def _get(self, ids: Sequence[str]) -> list[KernelRecord]:
        return [self._records[i][0] for i in ids if i in self._records]

    def _scan(self, filters: SearchFilters, limit: int | None) -> list[KernelRecord]:
        out = [r for r, _ in self._records.values() if filters.matches(r)]
        return out[:limit] if limit is not None else out

    def _nearest(self, vector: list[float], n: int, filters: SearchFilters) -> list[tuple[KernelRecord, float]]:
        with self._lock:
            cands = [(r, v) for r, v in self._records.values() if filters.matches(r)]
        if not cands:
            return []
        q = np.asarray(vector, dtype=np.float32)
        sims = np.stack([v for _, v in cands]) @ q
        order = np.argsort(-sims)[:n]
        return [(cands[i][0], 1.0 - float(sims[i])) for i in order]

    def _delete(self, ids: Sequence[str]) -> None:
        for i in ids:
            self._records.pop(i, None)

    def count(self) -> int:
        return len(self._records)
