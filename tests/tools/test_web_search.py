"""Web search: fake backends, caching, budgets, and a local server that never answers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tritonsmith.tools.web_search import (
    TRUSTED_DOMAINS,
    DdgsBackend,
    SearchBackend,
    SearchHit,
    SearchStatus,
    web_search,
    make_web_search_tool,
)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRITONSMITH_CACHE_DIR", str(tmp_path))


class FakeBackend:
    name = "fake"

    def __init__(self, hits: list[SearchHit] | None = None, *, fail_times: int = 0, hang_s: float = 0.0) -> None:
        self.hits = hits or []
        self.fail_times = fail_times
        self.hang_s = hang_s
        self.calls = 0

    def search(self, query: str, *, max_results: int, timeout_s: float) -> list[SearchHit]:
        self.calls += 1
        if self.hang_s:
            time.sleep(self.hang_s)
        if self.calls <= self.fail_times:
            raise ConnectionError("network is unreachable")
        return self.hits[:max_results]


HITS = [
    SearchHit(title="Fused softmax - Triton tutorials", url="https://triton-lang.org/main/getting-started/tutorials/02-fused-softmax.html",
              snippet="In this tutorial, you will write a fused softmax operation that is significantly faster " * 5),
    SearchHit(title="Random blog", url="https://example.com/softmax", snippet="spam"),
    SearchHit(title="triton repo", url="https://github.com/triton-lang/triton", snippet="Development repository"),
    SearchHit(title="dup", url="https://github.com/triton-lang/triton", snippet="duplicate"),
]


def test_fake_backend_results_and_protocol() -> None:
    fake = FakeBackend(HITS)
    assert isinstance(fake, SearchBackend)
    r = web_search("triton fused softmax", backend=fake, max_results=3)
    assert r.status is SearchStatus.OK and r.backend == "fake" and not r.cached
    assert [h.url for h in r.hits] == [HITS[0].url, HITS[1].url, HITS[2].url]
    assert "1. Fused softmax - Triton tutorials" in r.to_text()


def test_domain_allow_list_and_subdomains() -> None:
    r = web_search("triton softmax", backend=FakeBackend(HITS), domains=TRUSTED_DOMAINS)
    assert [h.url for h in r.hits] == [HITS[0].url, HITS[2].url]
    assert r.filtered_out == 2  # the off-list blog and the duplicate
    none = web_search("triton softmax", backend=FakeBackend(HITS[1:2]), domains=["pytorch.org"])
    assert none.status is SearchStatus.NO_RESULTS and "allowed domains" in none.message


def test_results_fit_the_size_budget() -> None:
    r = web_search("triton", backend=FakeBackend(HITS), max_chars=300)
    assert len(r.to_text()) <= 300
    assert r.hits and r.hits[0].snippet.endswith("...")


def test_cache_answers_the_second_call() -> None:
    fake = FakeBackend(HITS)
    first = web_search("  Triton   autotune ", backend=fake)
    second = web_search("triton autotune", backend=fake)
    assert fake.calls == 1 and second.cached and second.hits == first.hits
    web_search("triton autotune", backend=fake, use_cache=False)
    assert fake.calls == 2


def test_retry_then_success_and_retry_limit() -> None:
    flaky = FakeBackend(HITS, fail_times=1)
    assert web_search("q1", backend=flaky, retries=1).status is SearchStatus.OK and flaky.calls == 2
    broken = FakeBackend(HITS, fail_times=99)
    r = web_search("q2", backend=broken, retries=2)
    assert r.status is SearchStatus.UNAVAILABLE and broken.calls == 3
    assert "ConnectionError" in r.message and "network is unreachable" in r.to_text()
    # failures are not cached
    assert web_search("q2", backend=FakeBackend(HITS)).status is SearchStatus.OK


def test_hanging_backend_times_out_cleanly() -> None:
    slow = FakeBackend(HITS, hang_s=5.0)
    t0 = time.monotonic()
    r = web_search("slow query", backend=slow, timeout_s=0.5, retries=3)
    assert time.monotonic() - t0 < 1.5
    assert r.status is SearchStatus.UNAVAILABLE and "timed out" in r.message


def test_invalid_query() -> None:
    fake = FakeBackend(HITS)
    assert web_search("   ", backend=fake).status is SearchStatus.INVALID
    assert web_search("x" * 500, backend=fake).status is SearchStatus.INVALID
    assert fake.calls == 0


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An HTTP(S) proxy on 127.0.0.1 that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    thread.join(2)
    for c in conns:
        c.close()
    srv.close()


def test_ddgs_through_a_server_that_never_answers_times_out(silent_server: str) -> None:
    pytest.importorskip("ddgs")
    t0 = time.monotonic()
    r = web_search("triton matmul autotune", backend=DdgsBackend(proxy=silent_server), timeout_s=1.5, retries=1)
    elapsed = time.monotonic() - t0
    assert r.status is SearchStatus.UNAVAILABLE and r.backend == "ddgs"
    assert elapsed < 3.0


def test_langchain_tool_with_a_fake_backend() -> None:
    pytest.importorskip("langchain_core")
    tool = make_web_search_tool(backend=FakeBackend(HITS))
    assert tool.name == "search_web"
    out = tool.invoke({"query": "triton softmax", "max_results": 2})
    assert "triton-lang.org" in out and "example.com" not in out
    down = make_web_search_tool(backend=FakeBackend(HITS, fail_times=99)).invoke({"query": "anything"})
    assert down.startswith("web search unavailable")
