"""Where the memory lives: argument > environment > per-user default."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from chromadb.api.types import Documents, EmbeddingFunction

from tritonsmith.memory._embed import make_embedder

if TYPE_CHECKING:
    from tritonsmith.memory._store import KernelMemory

__all__ = ["ENV_DIR", "ENV_EMBEDDER", "ENV_URL", "default_memory_dir", "open_memory"]

log = logging.getLogger(__name__)

ENV_DIR = "TRITONSMITH_MEMORY_DIR"
ENV_URL = "TRITONSMITH_MEMORY_URL"
ENV_EMBEDDER = "TRITONSMITH_MEMORY_EMBEDDER"

_OPEN: dict[tuple[str, str | None], object] = {}
_OPEN_LOCK = threading.Lock()


def default_memory_dir() -> Path:
    """``$TRITONSMITH_MEMORY_DIR``, else ``$XDG_DATA_HOME/tritonsmith/memory`` (``~/.local/share/...``)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tritonsmith" / "memory"


def open_memory(
    path: str | Path | None = None,
    *,
    url: str | None = None,
    embedder: str | EmbeddingFunction[Documents] | None = None,
    seed: bool = True,
    in_memory: bool = False,
) -> KernelMemory:
    """Open (creating if needed) the kernel memory.

    - ``path`` (or ``$TRITONSMITH_MEMORY_DIR``, or the per-user default): an embedded Chroma store.
    - ``url`` (or ``$TRITONSMITH_MEMORY_URL``, e.g. ``http://chroma.team:8000``): a shared Chroma server.
    - ``in_memory=True``: nothing on disk.
    ``embedder`` picks the embedding for a new store (default ``structural``, or
    ``$TRITONSMITH_MEMORY_EMBEDDER``); an existing store keeps its own. With ``seed``, an empty store
    is filled with the seed library. One instance per location per process is shared.
    """
    from tritonsmith.memory._chroma import ChromaKernelMemory
    from tritonsmith.memory._store import InMemoryKernelMemory

    ef = _embedder(embedder)
    if in_memory:
        mem: KernelMemory = InMemoryKernelMemory(ef)
    else:
        url = url if url is not None else (None if path is not None else os.environ.get(ENV_URL) or None)
        key = (url or str(Path(path or default_memory_dir()).expanduser().resolve()), ef.name() if ef else None)
        with _OPEN_LOCK:
            cached = _OPEN.get(key)
            if cached is None:
                if url:
                    parsed = urlparse(url if "://" in url else f"http://{url}")
                    cached = ChromaKernelMemory(host=parsed.hostname or "localhost", port=parsed.port or 8000,
                                                embedder=ef)
                else:
                    cached = ChromaKernelMemory(path=Path(path or default_memory_dir()), embedder=ef)
                _OPEN[key] = cached
        mem = cached  # type: ignore[assignment]
    if seed:
        _seed_if_needed(mem)
    return mem


def _seed_if_needed(mem: KernelMemory) -> None:
    """Seed an empty store, and an embedded store whose seeds predate the packaged ones (new or measured)."""
    from tritonsmith.memory._seeds import manifest_digest, seed_memory

    from tritonsmith.memory._chroma import ChromaKernelMemory

    directory = mem.directory if isinstance(mem, ChromaKernelMemory) else None
    marker = directory / ".tritonsmith.seeds" if directory is not None else None
    digest = manifest_digest()
    if marker is None and mem.count() > 0:
        return
    if marker is not None and marker.exists() and marker.read_text() == digest:
        return
    results = seed_memory(mem)
    log.info("seeded %s: %d of %d seed kernels added or updated", mem.location,
             sum(r.status != "duplicate" for r in results), len(results))
    if marker is not None:
        marker.write_text(digest)


def _embedder(embedder: str | EmbeddingFunction[Documents] | None) -> EmbeddingFunction[Documents] | None:
    if embedder is None:
        env = os.environ.get(ENV_EMBEDDER)
        return make_embedder(env) if env else None
    if isinstance(embedder, str):
        return make_embedder(embedder)
    return embedder
