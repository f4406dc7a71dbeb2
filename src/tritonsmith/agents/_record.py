"""Record a chat model's conversation: every request the client sends and every reply it gets, as JSON.

``tritonsmith optimize --record DIR`` (setting ``record_dir``) puts a recording transport under the
OpenAI client: each exchange with the server is appended to ``DIR/transcript.json`` (rewritten after every
exchange, so an interrupted run keeps what it had). The file is what ``tests/graphs/test_replay.py``
replays through the whole loop, so a real model's behaviour stays tested offline. The API key never
reaches the file (headers are not recorded).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx

__all__ = ["TRANSCRIPT_NAME", "RecordingTransport", "load_transcript", "recording_client"]

TRANSCRIPT_NAME = "transcript.json"
SCHEMA = 1


class RecordingTransport(httpx.BaseTransport):
    """An httpx transport that forwards to ``inner`` and appends each JSON exchange to ``path``."""

    def __init__(self, path: Path, inner: httpx.BaseTransport | None = None) -> None:
        self.path = path
        self.inner = inner or httpx.HTTPTransport()
        self._lock = threading.Lock()
        self._exchanges: list[dict[str, Any]] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.time()
        try:
            response = self.inner.handle_request(request)
        except httpx.HTTPError as exc:  # a timeout or a refused connection: recorded, then raised as before
            self._add(request, started, {"error": f"{type(exc).__name__}: {exc}"})
            raise
        body = response.read()
        self._add(request, started, {"status": response.status_code, "body": _json_or_text(body)})
        return httpx.Response(response.status_code, headers=response.headers, content=body,
                              request=request, extensions=response.extensions)

    def close(self) -> None:
        self.inner.close()

    def _add(self, request: httpx.Request, started: float, reply: dict[str, Any]) -> None:
        with self._lock:
            self._exchanges.append({"path": request.url.path, "request": _json_or_text(request.content),
                                    "reply": reply, "seconds": round(time.time() - started, 3)})
            self._write()

    def _write(self) -> None:
        data = {"schema": SCHEMA, "exchanges": self._exchanges}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.path)


def recording_client(directory: str | Path, *, timeout_s: float) -> httpx.Client:
    """An httpx client whose exchanges go to ``directory/transcript.json``."""
    return httpx.Client(transport=RecordingTransport(Path(directory) / TRANSCRIPT_NAME), timeout=timeout_s)


def load_transcript(path: str | Path) -> list[dict[str, Any]]:
    """The exchanges of a recorded transcript (a clear error for a file that is not one)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("exchanges"), list):
        raise ValueError(f"{path} is not a tritonsmith transcript (schema {SCHEMA})")
    return data["exchanges"]


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
