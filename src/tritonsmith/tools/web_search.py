"""Web search for the generator: short, cached, bounded, and never a reason for the graph to fail.

``web_search`` is the plain function; ``make_web_search_tool`` wraps it for LangChain agents. The default
backend is ddgs (DuckDuckGo and friends); any object with a ``name`` and a ``search(query, *,
max_results, timeout_s)`` method returning :class:`SearchHit` items can stand in (tests, offline use,
another engine). Every call finishes within ``timeout_s`` plus a fraction of a second: the backend runs
in a daemon thread and is abandoned at the deadline. Offline, blocked or failing, the answer is a
:class:`SearchResponse` with status ``unavailable`` and a reason, never an exception.

Results are cached on disk, keyed by backend, query, result count and domain allow-list, under
``$TRITONSMITH_CACHE_DIR/web_search`` (see ``tritonsmith.core.paths.cache_dir``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

from tritonsmith.core.deprecation import deprecated_alias
from tritonsmith.core.paths import cache_dir

__all__ = ["DdgsBackend", "SearchBackend", "SearchHit", "SearchResponse", "SearchStatus", "TRUSTED_DOMAINS",
           "make_web_search_tool", "web_search"]

log = logging.getLogger(__name__)

TRUSTED_DOMAINS: tuple[str, ...] = (
    "triton-lang.org", "pytorch.org", "github.com", "githubusercontent.com", "arxiv.org", "openreview.net",
    "docs.nvidia.com", "developer.nvidia.com", "proceedings.mlsys.org", "papers.nips.cc", "dl.acm.org",
)
_CACHE_TTL_S = 7 * 24 * 3600.0
_TITLE_CHARS = 120


class SearchStatus(StrEnum):
    OK = "ok"
    NO_RESULTS = "no_results"
    UNAVAILABLE = "unavailable"  # offline, blocked, timed out or the backend failed
    INVALID = "invalid"  # an empty or oversized query


@dataclass(frozen=True, kw_only=True)
class SearchHit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True, kw_only=True)
class SearchResponse:
    status: SearchStatus
    query: str
    hits: tuple[SearchHit, ...] = ()
    message: str = ""
    backend: str = ""
    cached: bool = False
    elapsed_s: float = 0.0
    filtered_out: int = 0

    @property
    def ok(self) -> bool:
        return self.status is SearchStatus.OK

    def to_text(self) -> str:
        """Numbered title / URL / snippet lines, or the reason there are none."""
        if not self.hits:
            return f"web search {self.status.value}: {self.message}"
        lines = [f"{i}. {h.title}\n   {h.url}\n   {h.snippet}" for i, h in enumerate(self.hits, 1)]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        return d


@runtime_checkable
class SearchBackend(Protocol):
    """A search engine. ``search`` may raise or block; :func:`web_search` bounds and absorbs both."""

    name: str

    def search(self, query: str, *, max_results: int, timeout_s: float) -> list[SearchHit]: ...


@dataclass
class DdgsBackend:
    """ddgs metasearch (``pip install ddgs``). ``proxy`` routes it through an HTTP(S)/SOCKS proxy."""

    backend: str = "auto"
    region: str = "us-en"
    proxy: str | None = None
    name: str = field(default="ddgs", init=False)

    def search(self, query: str, *, max_results: int, timeout_s: float) -> list[SearchHit]:
        from ddgs import DDGS

        client = DDGS(proxy=self.proxy, timeout=max(1, int(timeout_s)))
        rows = client.text(query, region=self.region, max_results=max_results, backend=self.backend)
        return [SearchHit(title=str(r.get("title", "")), url=str(r.get("href") or r.get("url") or ""),
                          snippet=str(r.get("body") or r.get("snippet") or "")) for r in rows or []]


def web_search(
    query: str,
    *,
    max_results: int = 5,
    domains: Sequence[str] | None = None,
    backend: SearchBackend | None = None,
    timeout_s: float = 8.0,
    retries: int = 1,
    max_chars: int = 2000,
    use_cache: bool = True,
) -> SearchResponse:
    """Search the web; return at most ``max_results`` hits (title, URL, snippet) within ``max_chars``.

    ``domains`` keeps only hits from those domains (and their subdomains), e.g. :data:`TRUSTED_DOMAINS`.
    ``timeout_s`` bounds the whole call, retries included; ``retries`` is the number of extra attempts
    after a failure. Never raises for network trouble: see :class:`SearchStatus`.
    """
    started = time.monotonic()
    query = " ".join(query.split())
    engine = backend or DdgsBackend()
    if not query or len(query) > 400:
        return SearchResponse(status=SearchStatus.INVALID, query=query, backend=engine.name,
                              message="the query must be 1-400 characters")
    key = _cache_key(engine.name, query, max_results, domains)
    if use_cache and (hit := _cache_get(key)) is not None:
        return dataclasses.replace(_fit(hit, max_chars), cached=True, elapsed_s=time.monotonic() - started)
    wanted = max_results * 3 if domains else max_results
    rows, reason = _search_bounded(engine, query, wanted, timeout_s, retries, started)
    elapsed = time.monotonic() - started
    if rows is None:
        log.info("web search unavailable for %r: %s", query, reason)
        return SearchResponse(status=SearchStatus.UNAVAILABLE, query=query, backend=engine.name, elapsed_s=elapsed,
                              message=f"{reason}; continue without it")
    kept = [h for h in _dedupe(rows) if not domains or _allowed(h.url, domains)][:max_results]
    response = SearchResponse(
        status=SearchStatus.OK if kept else SearchStatus.NO_RESULTS, query=query, hits=tuple(kept),
        backend=engine.name, elapsed_s=elapsed, filtered_out=len(rows) - len(kept) if domains else 0,
        message="" if kept else ("no results" + (f" from the allowed domains ({len(rows)} elsewhere)" if rows else "")))
    if use_cache:
        _cache_put(key, response)
    return _fit(response, max_chars)


def make_web_search_tool(*, backend: SearchBackend | None = None, domains: Sequence[str] | None = TRUSTED_DOMAINS,
                    timeout_s: float = 8.0, max_chars: int = 2000) -> Any:
    """A LangChain tool around :func:`web_search` (trusted domains by default)."""
    from langchain_core.tools import StructuredTool

    from tritonsmith.tools.submit import bad_arguments

    def search_web(query: str, max_results: int = 5) -> str:
        """Search the web (Triton and PyTorch docs, GitHub, papers) for kernel techniques, APIs and error
        messages. Returns numbered results with title, URL and snippet, or why the search is unavailable.

        Args:
            query: what to look for, e.g. an error message or "triton tl.dot input_precision".
            max_results: how many results to return (1-10).
        """
        return web_search(query, max_results=max(1, min(int(max_results), 10)), domains=domains, backend=backend,
                          timeout_s=timeout_s, max_chars=max_chars).to_text()

    return StructuredTool.from_function(search_web, name="search_web", parse_docstring=True,
                                        handle_validation_error=bad_arguments)


web_search_tool = deprecated_alias("web_search_tool", make_web_search_tool)


def _search_bounded(engine: SearchBackend, query: str, max_results: int, timeout_s: float, retries: int,
                    started: float) -> tuple[list[SearchHit] | None, str]:
    """Run the backend in a daemon thread per attempt; give up at the overall deadline."""
    deadline = started + timeout_s
    reason = "no attempt made"
    for attempt in range(retries + 1):
        left = deadline - time.monotonic()
        if left <= 0.05:
            break
        box: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)

        def work(left: float = left) -> None:
            try:
                box.put((True, engine.search(query, max_results=max_results, timeout_s=left)))
            except BaseException as exc:  # noqa: BLE001 - any backend failure becomes "unavailable"
                box.put((False, exc))

        threading.Thread(target=work, name="tritonsmith-web-search", daemon=True).start()
        try:
            ok, value = box.get(timeout=left)
        except queue.Empty:
            return None, f"timed out after {timeout_s:.1f} s"
        if ok:
            return list(value), ""
        reason = f"{type(value).__name__}: {str(value)[:200]}"
        log.debug("web search attempt %d failed: %s", attempt + 1, reason)
        time.sleep(min(0.3, max(0.0, deadline - time.monotonic())))
    return None, reason


def _allowed(url: str, domains: Sequence[str]) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return any(host == d or host.endswith("." + d) for d in (x.lower().lstrip(".") for x in domains))


def _dedupe(rows: list[SearchHit]) -> list[SearchHit]:
    seen: set[str] = set()
    out = []
    for h in rows:
        if h.url and h.url not in seen:
            seen.add(h.url)
            out.append(h)
    return out


def _fit(response: SearchResponse, max_chars: int) -> SearchResponse:
    """Trim titles and snippets (then drop trailing hits) so ``to_text()`` fits ``max_chars``."""
    hits = [dataclasses.replace(h, title=_cut(h.title, _TITLE_CHARS)) for h in response.hits]
    fixed = sum(len(h.title) + len(h.url) + 16 for h in hits)
    per_snippet = max(0, (max_chars - fixed) // max(1, len(hits)))
    hits = [dataclasses.replace(h, snippet=_cut(h.snippet, per_snippet)) for h in hits]
    trimmed = dataclasses.replace(response, hits=tuple(hits))
    while trimmed.hits and len(trimmed.to_text()) > max_chars:
        trimmed = dataclasses.replace(trimmed, hits=trimmed.hits[:-1])
    return trimmed


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."


def _cache_key(backend: str, query: str, max_results: int, domains: Sequence[str] | None) -> str:
    raw = json.dumps([backend, query.lower(), max_results, sorted(domains or [])])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _cache_path(key: str) -> Path:
    return cache_dir() / "web_search" / f"{key}.json"


def _cache_get(key: str) -> SearchResponse | None:
    path = _cache_path(key)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if time.time() - float(data.get("stored_at", 0)) > _CACHE_TTL_S:
        return None
    r = data["response"]
    return SearchResponse(status=SearchStatus(r["status"]), query=r["query"], message=r.get("message", ""),
                          backend=r.get("backend", ""), hits=tuple(SearchHit(**h) for h in r.get("hits", [])),
                          filtered_out=r.get("filtered_out", 0))


def _cache_put(key: str, response: SearchResponse) -> None:
    path = _cache_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"stored_at": time.time(), "response": response.to_dict()}))
        tmp.replace(path)
    except OSError as exc:  # a read-only cache only costs the next call a search
        log.warning("web search cache not written: %s", exc)
