"""The Chroma store across processes: reopen, two concurrent writers, a writer killed mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from memhelp import PROBLEMS, make_record

from tritonsmith.memory import ChromaKernelMemory, MemoryConfigError, make_embedder

WRITER = Path(__file__).with_name("_writer.py")


def _writer(store: Path, tag: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WRITER), str(store), tag, str(count)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_records_persist_and_reopen_in_a_new_process(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = _writer(store, "first", 4)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    ids = out.split()
    # a second process: the collection reopens without being told its embedding function
    code = ("import sys, tritonsmith.memory as m; mem = m.ChromaKernelMemory(path=sys.argv[1]); "
            "print(type(mem.embedder).__name__, mem.count(), mem.search(sys.argv[2], k=1)[0].record.problem_name)")
    res = subprocess.run([sys.executable, "-c", code, str(store), PROBLEMS["conv_relu"]], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["StructuralEmbedding", "4", "conv_relu"]
    mem = ChromaKernelMemory(path=store)
    assert sorted(r.id for r in mem.list()) == sorted(ids)


def test_reader_sees_writes_of_another_process(tmp_path: Path) -> None:
    store = tmp_path / "store"
    mem = ChromaKernelMemory(path=store)
    twin = ChromaKernelMemory(path=store)  # two handles in one process share one Chroma index
    mem.add(make_record("softmax", 1))
    assert len(mem.search(PROBLEMS["conv_relu"], k=3)) == 1 == len(twin.search(PROBLEMS["conv_relu"], k=3))
    proc = _writer(store, "other", 3)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert mem.count() == 4
    for handle in (mem, twin):
        hits = handle.search(PROBLEMS["conv_relu"], k=3)
        assert hits[0].record.id in out.split()  # the other process's conv kernel, found through the index


def test_two_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ChromaKernelMemory(path=store)
    procs = [_writer(store, tag, 25) for tag in ("alpha", "beta")]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    ids = [i for out, _ in outs for i in out.split()]
    assert len(set(ids)) == 50
    fresh = subprocess.run(
        [sys.executable, "-c", "import sys, tritonsmith.memory as m; mem = m.ChromaKernelMemory(path=sys.argv[1]); "
         "print(*[r.id for r in mem.list()]); print(len(mem.search(sys.argv[2], k=20, one_per_problem=False)))",
         str(store), PROBLEMS["softmax"]], capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr
    listed, found = fresh.stdout.splitlines()
    assert sorted(listed.split()) == sorted(ids)
    assert int(found) == 20  # the vector index holds both writers' records too, not only the SQL table


def test_killed_writer_leaves_every_completed_record(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ChromaKernelMemory(path=store)
    proc = _writer(store, "doomed", 10_000)
    done: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while len(done) < 8 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        done.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)  # mid-way through its next add, most likely
    proc.wait(timeout=30)
    assert len(done) >= 8, proc.stderr.read() if proc.stderr else ""
    mem = ChromaKernelMemory(path=store)
    stored = {r.id for r in mem.list()}
    assert set(done) <= stored
    assert mem.add(make_record("softmax", 424242)).status == "added"  # the lock died with the writer
    assert mem.search(PROBLEMS["softmax"], k=1)


def test_a_store_keeps_its_embedder(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ChromaKernelMemory(path=store, embedder=make_embedder("structural", dim=256)).add(make_record("softmax", 1))
    again = ChromaKernelMemory(path=store)
    assert again.embedder.get_config() == {"dim": 256}
    assert again.search(PROBLEMS["softmax"], k=1)
    try:
        ChromaKernelMemory(path=tmp_path / "store", embedder=_FakeOther())
    except MemoryConfigError as exc:
        assert "structural" in str(exc)
    else:
        raise AssertionError("a store opened with a different embedder")


class _FakeOther:
    @staticmethod
    def name() -> str:
        return "some-other-embedder"
