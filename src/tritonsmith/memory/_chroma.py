"""KernelMemory on Chroma: an embedded PersistentClient (one directory) or a Chroma server (HttpClient).

Embedded Chroma keeps a vector index in each process's memory, so two processes on one directory
need help: every write takes an exclusive ``flock`` on ``.tritonsmith.lock``, reopens the client if
another process wrote since (a generation file changes on every write), writes, and bumps the
generation. Readers reopen on a changed generation too. A writer killed mid-write releases the lock
with its process; Chroma's SQLite log keeps every completed write.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import chromadb
from chromadb.config import Settings
from chromadb.api.types import Documents, EmbeddingFunction

from tritonsmith.memory._embed import StructuralEmbedding, short_name
from tritonsmith.memory._record import KernelRecord
from tritonsmith.memory._store import KernelMemory, SearchFilters

__all__ = ["COLLECTION", "ChromaKernelMemory", "MemoryConfigError"]

log = logging.getLogger(__name__)

COLLECTION = "tritonsmith-kernels"
_LOCK = ".tritonsmith.lock"
_GEN = ".tritonsmith.gen"


class MemoryConfigError(ValueError):
    """The store exists with another embedder than the one asked for (vectors would not compare)."""


class _Connection:
    """The one Chroma client of this process for one location.

    Chroma shares a single in-memory index per directory and process, whatever the number of clients, so
    reopening to see other processes' writes only works when no other client of ours holds it open.
    """

    def __init__(self, path: Path | None, host: str | None, port: int) -> None:
        self.path, self.host, self.port = path, host, port
        self.client: Any = None
        self.gen: str | None = None
        self.version = 0
        self.lock = threading.RLock()

    def read_gen(self) -> str | None:
        if not self.path:
            return None
        try:
            return (self.path / _GEN).read_text()
        except FileNotFoundError:
            return ""

    def fresh(self) -> None:
        """Reopen when another process wrote since we last looked (its index changes are not in ours)."""
        with self.lock:
            if self.client is not None and (not self.path or self.read_gen() == self.gen):
                return
            if self.client is not None:
                with contextlib.suppress(AttributeError):
                    self.client.close()
            settings = Settings(anonymized_telemetry=False)  # a library must not phone home
            if self.path:
                self.client = chromadb.PersistentClient(path=str(self.path), settings=settings)
            else:
                self.client = chromadb.HttpClient(host=self.host, port=self.port, settings=settings)
            self.gen = self.read_gen()
            self.version += 1

    def bump(self) -> None:
        """After a write (under the lock): tell other processes to reopen."""
        assert self.path is not None
        gen = uuid.uuid4().hex
        tmp = self.path / f"{_GEN}.{os.getpid()}"
        tmp.write_text(gen)
        os.replace(tmp, self.path / _GEN)
        self.gen = gen


_CONNECTIONS: dict[str, _Connection] = {}
_CONNECTIONS_LOCK = threading.Lock()


def _connection(location: str, path: Path | None, host: str | None, port: int) -> _Connection:
    with _CONNECTIONS_LOCK:
        if location not in _CONNECTIONS:
            _CONNECTIONS[location] = _Connection(path, host, port)
        return _CONNECTIONS[location]


class ChromaKernelMemory(KernelMemory):
    """Kernel memory in a Chroma collection; build it with :func:`tritonsmith.memory.open_memory`."""

    def __init__(
        self,
        *,
        path: str | Path | None = None,
        host: str | None = None,
        port: int = 8000,
        embedder: EmbeddingFunction[Documents] | None = None,
        collection: str = COLLECTION,
    ) -> None:
        if (path is None) == (host is None):
            raise ValueError("give exactly one of path (embedded store) or host (Chroma server)")
        self._path = Path(path).expanduser().resolve() if path is not None else None
        self._name = collection
        self.location = str(self._path) if self._path else f"http://{host}:{port}"
        self._asked = embedder
        if self._path:
            self._path.mkdir(parents=True, exist_ok=True)
        self._conn = _connection(self.location, self._path, host, port)
        self._version = -1
        with self._write():  # creating the collection is a write: two first users must not race
            pass

    def _open_collection(self) -> Any:
        client = self._conn.client
        names = {c.name for c in client.list_collections()}
        if self._name in names:
            col = client.get_collection(self._name)  # the embedder comes back from its stored config
            stored = col.configuration.get("embedding_function")
            if stored is None:
                raise MemoryConfigError(f"{self.location}: collection {self._name} has no embedder config")
            if self._asked is not None and self._asked.name() != stored.name():
                raise MemoryConfigError(
                    f"{self.location} was built with the {short_name(stored)!r} embedder, not "
                    f"{short_name(self._asked)!r}; open it without choosing one, or export and import "
                    "into a new directory to re-embed"
                )
            self.embedder = stored
            return col
        self.embedder = self._asked or StructuralEmbedding()
        return client.create_collection(
            self._name, embedding_function=self.embedder,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"embedder": short_name(self.embedder), "schema": 1},
        )

    @property
    def directory(self) -> Path | None:
        """The store's directory (None for a Chroma server)."""
        return self._path

    def _fresh(self) -> None:
        with self._conn.lock:
            self._conn.fresh()
            if self._version != self._conn.version:
                self._collection = self._open_collection()
                self._version = self._conn.version

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        if not self._path:
            self._fresh()
            yield
            return
        with self._conn.lock, open(self._path / _LOCK, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._fresh()
                yield
                self._conn.bump()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # -- primitives ------------------------------------------------------------------------------
    def _upsert(self, records: Sequence[KernelRecord], texts: Sequence[str], vectors: Sequence[list[float]]) -> None:
        self._collection.upsert(ids=[r.id for r in records], embeddings=list(vectors), documents=list(texts),
                                metadatas=[r.metadata() for r in records])

    def _get(self, ids: Sequence[str]) -> list[KernelRecord]:
        if not ids:
            return []
        self._fresh()
        got = self._collection.get(ids=list(ids), include=["metadatas"])
        by_id = {i: KernelRecord.from_json(str(m["record"])) for i, m in zip(got["ids"], got["metadatas"], strict=True)}
        return [by_id[i] for i in ids if i in by_id]

    def _scan(self, filters: SearchFilters, limit: int | None) -> list[KernelRecord]:
        self._fresh()
        got = self._collection.get(where=_where(filters), include=["metadatas"], limit=limit)
        recs = [KernelRecord.from_json(str(m["record"])) for m in got["metadatas"]]
        return [r for r in recs if r.id not in filters.exclude_ids]

    def _nearest(self, vector: list[float], n: int, filters: SearchFilters) -> list[tuple[KernelRecord, float]]:
        self._fresh()
        total = self._collection.count()
        if total == 0:
            return []
        # A ``where`` filter costs Chroma ~50 ms at 10k records; the nearest 3n, filtered here, are ~5 ms and
        # almost always enough (lessons and other devices are a minority). Fall back when they are not.
        wide = min(total, max(3 * n, 60))
        pairs = [(r, d) for r, d in self._query(vector, wide, None) if filters.matches(r)]
        if len(pairs) >= n or wide == total:
            return pairs[:n]
        return [(r, d) for r, d in self._query(vector, min(n, total), _where(filters)) if filters.matches(r)]

    def _query(self, vector: list[float], n: int, where: dict[str, Any] | None) -> list[tuple[KernelRecord, float]]:
        got = self._collection.query(query_embeddings=[vector], n_results=n, where=where,
                                     include=["metadatas", "distances"])
        return [(KernelRecord.from_json(str(m["record"])), float(d))
                for m, d in zip(got["metadatas"][0], got["distances"][0], strict=True)]

    def _delete(self, ids: Sequence[str]) -> None:
        self._collection.delete(ids=list(ids))

    def count(self) -> int:
        self._fresh()
        return int(self._collection.count())


def _where(filters: SearchFilters) -> dict[str, Any] | None:
    clauses = filters.clauses()
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}
