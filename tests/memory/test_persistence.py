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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_team_server_through_http_client(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A local Chroma server on 127.0.0.1 stands in for a team's: two processes share one memory by URL."""
    import shutil
    import socket

    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent))
    assert chroma, "the chroma CLI comes with chromadb"
    port = _free_port()
    server = subprocess.Popen([chroma, "run", "--path", str(tmp_path / "srv"), "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "chroma server did not start"
                time.sleep(0.3)
        monkeypatch.setenv("TRITONSMITH_MEMORY_URL", f"http://127.0.0.1:{port}")
        from tritonsmith.memory import open_memory

        mem = open_memory(seed=False)
        assert mem.location == f"http://127.0.0.1:{port}"
        mem.add(make_record("softmax", 1))
        code = ("import tritonsmith.memory as m, sys; sys.path.insert(0, sys.argv[1]); from memhelp import make_record; "
                "mem = m.open_memory(seed=False); print(mem.add(make_record('conv_relu', 2)).status, mem.count())")
        res = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        assert res.stdout.split() == ["added", "2"]
        assert mem.search(PROBLEMS["conv_relu"], k=1)[0].record.problem_name == "conv_relu"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_open_memory_seeds_on_first_use_and_again_when_the_seeds_change(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from tritonsmith.memory import SearchFilters, default_memory_dir, open_memory

    monkeypatch.setenv("TRITONSMITH_MEMORY_DIR", str(tmp_path / "env-store"))
    monkeypatch.delenv("TRITONSMITH_MEMORY_URL", raising=False)
    assert default_memory_dir() == tmp_path / "env-store"
    mem = open_memory()
    assert mem.location == str((tmp_path / "env-store").resolve())
    seeds = mem.list(SearchFilters(origin="seed"))
    assert len(seeds) == 11
    mem.delete([seeds[0].id])
    assert open_memory().count() == 10  # seeds already current: a deleted one stays deleted
    (tmp_path / "env-store" / ".tritonsmith.seeds").write_text("older seed library")
    assert open_memory().count() == 11
    assert open_memory(tmp_path / "other", seed=False).count() == 0
    monkeypatch.delenv("TRITONSMITH_MEMORY_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_memory_dir() == tmp_path / "xdg" / "tritonsmith" / "memory"
