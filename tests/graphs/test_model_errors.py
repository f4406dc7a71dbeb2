"""Chat-model failures through the real ChatOpenAI client and a local server: each one is an attempt.

HTTP 400 (context length: the prompt is shortened and sent once more), HTTP 500 in the middle of a run,
a timeout and a malformed reply all become attempts with status ``model_error`` and a clear message; the
run goes on or stops cleanly, and ``tritonsmith optimize`` always writes its reports with every attempt
evaluated so far.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from replay_server import tool_call
from typer.testing import CliRunner

from tritonsmith.graphs import optimize
from tritonsmith.cli.optimize import optimize_command
from tritonsmith.tools.ports import RetrievedKernel

CONTEXT_400 = {"_status": 400, "_body": {"error": {
    "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9310 "
               "tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}}
SERVER_500 = {"_status": 500, "_body": {"error": {"message": "internal error: the GPU fell off the bus",
                                                  "type": "server_error"}}}

app = typer.Typer()
app.command("optimize")(optimize_command)
app.command("noop")(lambda: None)


class _OneExample:
    """A kernel store whose every search returns one long example (what a shortened prompt drops)."""

    def similar(self, problem: Any, *, k: int, device_name: str | None = None) -> list[RetrievedKernel]:
        return [RetrievedKernel(problem_name="softmax_seed", source="# EXAMPLE_FROM_MEMORY\n" + "x = 1\n" * 400,
                                reason="same ops")]

    def search_text(self, query: str, *, k: int) -> list[RetrievedKernel]:
        return []

    def remember(self, *args: Any, **kwargs: Any) -> None:
        return None


def _run(server: Any, reference: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("llm_timeout_s", 30.0)
    return optimize(reference, model="replayed-coder", base_url=server.base_url, api_key="sk-local", device="cpu",
                    trials=1, max_retries=0, **kwargs)


def test_context_length_shortens_the_prompt_and_retries_once(replay, softmax_reference, softmax_candidate):
    server = replay([CONTEXT_400, tool_call("submit_kernel", {"source": softmax_candidate}, "c1")])
    result = _run(server, softmax_reference, iterations=1, memory=_OneExample())
    assert result.ok and [a.status for a in result.attempts] == ["correct"]
    full, short = (r["messages"][1]["content"] for r in server.requests)
    assert "EXAMPLE_FROM_MEMORY" in full and "EXAMPLE_FROM_MEMORY" not in short and len(short) < len(full)


def test_context_length_twice_is_a_model_error_attempt(replay, softmax_reference):
    server = replay([CONTEXT_400, CONTEXT_400, SERVER_500])
    result = _run(server, softmax_reference, iterations=1, memory=_OneExample())
    attempt, then = result.attempts  # a model error spends no iteration: the next request is a 500
    assert (attempt.status, attempt.reward, attempt.source) == ("model_error", 0.0, None)
    assert "context length" in attempt.message and "shortened prompt" in attempt.message
    assert "context_length_exceeded" in attempt.message and len(server.requests) == 3
    assert then.status == "model_error" and "HTTP 500" in then.message
    assert result.status == "gave_up" and "failed twice in a row" in result.reason


def test_a_500_mid_run_keeps_iteration_1_in_the_written_reports(replay, softmax_reference, wrong_candidate,
                                                                tmp_path, monkeypatch):
    server = replay([tool_call("submit_kernel", {"source": wrong_candidate}, "c1"), SERVER_500, SERVER_500])
    for name, value in {"TRITONSMITH_API_KEY": "sk-local", "TRITONSMITH_MAX_RETRIES": "0",
                        "TRITONSMITH_LLM_TIMEOUT": "30"}.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["optimize", str(softmax_reference), "--device", "cpu", "--trials", "1",
                                   "--no-memory", "--generator", "llm", "--base-url", server.base_url,
                                   "--out", str(out)])
    assert res.exit_code == 1, res.output  # gave up, cleanly: no traceback
    assert "model_error" in res.output and "failed twice in a row" in " ".join(res.output.split())
    report = json.loads((out / "report.json").read_text())
    assert [(a["iteration"], a["status"]) for a in report["attempts"]] == [
        (1, "wrong_output"), (2, "model_error"), (3, "model_error")]
    assert "HTTP 500" in report["attempts"][1]["message"] and "GPU fell off the bus" in report["attempts"][1]["message"]
    md = (out / "report.md").read_text()
    assert "| 1 | llm |" in md and "wrong_output" in md and "model_error" in md
    # the model never read the server's failure as its own: iteration 3's request ends with iteration 1's verdict
    last = server.requests[2]["messages"][-1]
    assert last["role"] == "tool" and "wrong_output" in last["content"] and "model error" not in last["content"]


def test_a_timeout_is_a_model_error_and_the_run_goes_on(replay, softmax_reference, softmax_candidate):
    server = replay([{"_sleep": 4.0, "_status": 200, "_body": {}},
                     tool_call("submit_kernel", {"source": softmax_candidate}, "c1")])
    result = _run(server, softmax_reference, iterations=2, memory=False, llm_timeout_s=1.0)
    assert [a.status for a in result.attempts] == ["model_error", "correct"] and result.ok
    assert "timed out" in result.attempts[0].message


@pytest.mark.parametrize("raw", ["this is not JSON", '{"id": "x", "object": "chat.completion", "choices": "none"}'])
def test_a_malformed_reply_is_a_model_error_and_the_run_goes_on(replay, softmax_reference, softmax_candidate, raw):
    server = replay([{"_status": 200, "_raw": raw}, tool_call("submit_kernel", {"source": softmax_candidate}, "c1")])
    result = _run(server, softmax_reference, iterations=2, memory=False)
    assert [a.status for a in result.attempts] == ["model_error", "correct"] and result.ok
    assert "malformed" in result.attempts[0].message or "not a valid" in result.attempts[0].message


def test_a_bad_key_stops_at_once_with_what_to_fix(replay, softmax_reference):
    server = replay([{"_status": 401, "_body": {"error": {"message": "Incorrect API key provided",
                                                          "code": "invalid_api_key"}}}])
    result = _run(server, softmax_reference, iterations=3, memory=False)
    (attempt,) = result.attempts
    assert attempt.status == "model_error" and "OPENAI_API_KEY" in attempt.message
    assert result.status == "gave_up" and "cannot serve this run" in result.reason


def test_resume_continues_a_run_the_model_server_ended(replay, softmax_reference, wrong_candidate,
                                                       softmax_candidate, tmp_path, monkeypatch):
    for name, value in {"TRITONSMITH_API_KEY": "sk-local", "TRITONSMITH_MAX_RETRIES": "0",
                        "TRITONSMITH_LLM_TIMEOUT": "30"}.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "out"
    down = replay([tool_call("submit_kernel", {"source": wrong_candidate}, "c1"), SERVER_500, SERVER_500])
    args = ["optimize", str(softmax_reference), "--device", "cpu", "--trials", "1", "--no-memory",
            "--generator", "llm", "--out", str(out)]
    first = CliRunner().invoke(app, [*args, "--base-url", down.base_url])
    assert first.exit_code == 1, first.output
    back = replay([tool_call("submit_kernel", {"source": softmax_candidate}, "c2")])
    again = CliRunner().invoke(app, [*args, "--base-url", back.base_url, "--resume"])
    assert again.exit_code == 0, again.output
    report = json.loads((out / "report.json").read_text())
    assert [(a["iteration"], a["status"]) for a in report["attempts"]] == [
        (1, "wrong_output"), (2, "model_error"), (3, "model_error"), (4, "correct")]
    assert report["status"] == "verified" and len(back.requests) == 1
    # a resumed run (a new process) starts a fresh prompt that holds iteration 1's verdict
    assert "Your previous attempt (iteration 1, wrong_output)" in back.requests[0]["messages"][1]["content"]


def test_resume_without_a_saved_run_says_what_to_do(tmp_path, softmax_reference):
    res = CliRunner().invoke(app, ["optimize", str(softmax_reference), "--device", "cpu", "--generator", "builtin",
                                   "--no-memory", "--out", str(tmp_path / "none"), "--resume"])
    assert res.exit_code == 2 and "no run to resume" in " ".join(res.output.split())
