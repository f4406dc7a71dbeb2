"""A whole optimize run through the real ChatOpenAI client against a local OpenAI-compatible server.

The server on 127.0.0.1 replays scripted chat.completions responses (a tool call, a wrong kernel
submitted through ``submit_kernel``, then the fix in a fenced block); the candidates are evaluated for
real by the Triton interpreter.
"""

from __future__ import annotations

from typing import Any

from replay_server import tool_call

from tritonsmith.graphs import optimize
from tritonsmith.memory import InMemoryKernelMemory


def test_optimize_through_chat_openai_and_a_local_server(replay, softmax_reference, softmax_candidate,
                                                         wrong_candidate, monkeypatch):
    server = replay([
        tool_call("kernel_search", {"query": "row softmax", "k": 2}, "call_a"),
        tool_call("submit_kernel", {"source": wrong_candidate, "notes": "first try"}, "call_b"),
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


def test_record_writes_every_request_and_reply(replay, softmax_reference, softmax_candidate, wrong_candidate,
                                               tmp_path):
    from tritonsmith.agents._record import load_transcript

    server = replay([tool_call("submit_kernel", {"source": wrong_candidate}, "c1"),
                     {"_status": 500, "_body": {"error": {"message": "overloaded"}}},
                     tool_call("submit_kernel", {"source": softmax_candidate}, "c2")])
    result = optimize(softmax_reference, model="m", base_url=server.base_url, api_key="sk-secret", device="cpu",
                      trials=1, memory=False, max_retries=0, record_dir=str(tmp_path / "rec"), llm_timeout_s=30.0)
    assert [a.status for a in result.attempts] == ["wrong_output", "model_error", "correct"]
    exchanges = load_transcript(tmp_path / "rec" / "transcript.json")
    assert [e["reply"]["status"] for e in exchanges] == [200, 500, 200]
    assert [e["request"]["messages"] for e in exchanges] == [r["messages"] for r in server.requests]
    assert exchanges[0]["reply"]["body"]["choices"][0]["message"]["tool_calls"][0]["id"] == "c1"
    assert "sk-secret" not in (tmp_path / "rec" / "transcript.json").read_text()
