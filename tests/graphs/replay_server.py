"""A local OpenAI-compatible server on 127.0.0.1 that replays scripted chat.completions (and faults)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

class ReplayServer:
    """Answers POST /v1/chat/completions with the next scripted message (JSON or server-sent events)."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                if not self.path.endswith("/chat/completions") or not server.script:
                    self.send_error(404 if server.script else 500, "no scripted response")
                    return
                message = server.script.pop(0)
                if "_status" in message or "_raw" in message or "_sleep" in message:
                    self._fault(message)
                elif body.get("stream"):
                    self._stream(body, message)
                else:
                    self._json(body, message)

            def _fault(self, fault: dict[str, Any]) -> None:
                """A scripted failure: an HTTP error status with a JSON body, a raw body, or a long sleep."""
                if "_sleep" in fault:
                    time.sleep(fault["_sleep"])
                payload = (fault.get("_raw") or json.dumps(fault.get("_body", {}))).encode()
                self.send_response(fault.get("_status", 200))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

            def _json(self, body: dict[str, Any], message: dict[str, Any]) -> None:
                payload = json.dumps(_completion(body, message)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, body: dict[str, Any], message: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                chunk = _completion(body, message)
                chunk["object"] = "chat.completion.chunk"
                delta = dict(message, role="assistant")
                for i, call in enumerate(delta.get("tool_calls", [])):
                    call["index"] = i
                chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": chunk["choices"][0]["finish_reason"]}]
                self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def _completion(body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"], "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                                 "finish_reason": finish}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}}


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": json.dumps(args)}}]}


@pytest.fixture
def replay() -> Iterator[Any]:
    servers: list[ReplayServer] = []

    def start(script: list[dict[str, Any]]) -> ReplayServer:
        server = ReplayServer(script)
        server.thread.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.httpd.shutdown()
        server.httpd.server_close()
