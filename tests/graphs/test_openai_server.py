"""A whole optimize run through the real ChatOpenAI client against a local OpenAI-compatible server.

The server on 127.0.0.1 replays scripted chat.completions responses (a tool call, a wrong kernel
submitted through ``submit_kernel``, then the fix in a fenced block); the candidates are evaluated for
real by the Triton interpreter.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tritonsmith.graphs import optimize
from tritonsmith.memory import InMemoryKernelMemory


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
                if body.get("stream"):
                    self._stream(body, message)
                else:
                    self._json(body, message)

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


def _tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
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


def test_optimize_through_chat_openai_and_a_local_server(replay, softmax_reference, softmax_candidate,
                                                         wrong_candidate, monkeypatch):
    server = replay([
        _tool_call("kernel_search", {"query": "row softmax", "k": 2}, "call_a"),
        _tool_call("submit_kernel", {"source": wrong_candidate, "notes": "first try"}, "call_b"),
        {"content": f"The sum was off by one. Fixed:\n```python\n{softmax_candidate}```"},
    ])
    monkeypatch.setenv("TRITONSMITH_API_KEY", "sk-local-test")
    events: list[dict[str, Any]] = []
    result = optimize(softmax_reference, model="replayed-coder", base_url=server.base_url, device="cpu",
                      trials=1, memory=InMemoryKernelMemory(), on_event=events.append, llm_timeout_s=30.0,
                      max_retries=0)
    assert result.ok and result.generator == "llm"
    assert [(a.status, a.reward) for a in result.attempts] == [("wrong_output", 0.0), ("correct", 0.5)]
    assert (result.input_tokens, result.output_tokens) == (3000, 600)
    assert [e["status"] for e in events if e["event"] == "evaluated"] == ["wrong_output", "correct"]

    first, after_tool, refine = server.requests
    assert all(r["model"] == "replayed-coder" for r in server.requests)
    assert server.headers[0]["authorization"] == "Bearer sk-local-test"
    assert {t["function"]["name"] for t in first["tools"]} >= {"kernel_search", "submit_kernel", "profile_kernel"}
    tool_reply = after_tool["messages"][-1]
    assert tool_reply["role"] == "tool" and tool_reply["tool_call_id"] == "call_a"
    assert "no verified kernel" in tool_reply["content"]  # the memory was empty: said so, not an error
    feedback = refine["messages"][-1]["content"]
    assert "wrong_output" in feedback and "first bad index" in feedback
