"""Recorded real-model conversations replayed through the whole loop (ChatOpenAI, the graph, the evaluator).

Each folder under ``transcripts/`` holds a ``transcript.json`` written by ``tritonsmith optimize --record``
against a live endpoint and a ``run.json`` (problem, settings, what happened). The local server replays the
recorded replies in order; the loop must ask the same number of requests, shaped the same way (roles of
every message: tool results, feedback, the continued conversation), and reach the same verdicts, with every
candidate evaluated for real. A change that alters how the loop talks to a model shows up here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritonsmith.agents._record import load_transcript
from tritonsmith.graphs import optimize
from tritonsmith.memory import InMemoryKernelMemory, seed_memory
from tritonsmith.core.problem import Problem

TRANSCRIPTS = sorted(p for p in (Path(__file__).parent / "transcripts").iterdir() if (p / "run.json").is_file())


@pytest.mark.parametrize("folder", TRANSCRIPTS, ids=[p.name for p in TRANSCRIPTS])
def test_a_recorded_conversation_replays_through_the_loop(folder: Path, replay: Any) -> None:
    run = json.loads((folder / "run.json").read_text())
    exchanges = load_transcript(folder / "transcript.json")
    server = replay([{"_status": e["reply"]["status"], "_raw": json.dumps(e["reply"]["body"])} for e in exchanges])
    memory = InMemoryKernelMemory()
    seed_memory(memory)
    spec = run["problem"]
    settings = run["settings"]
    result = optimize(Problem.from_source(spec["source"], name=spec["name"], level=spec.get("level")),
                      model=settings["model"], base_url=server.base_url, api_key="sk-replay",
                      device=settings["device"], scale=settings["scale"], iterations=settings["iterations"],
                      trials=1, memory=memory, max_retries=0, llm_timeout_s=60.0)
    expected = run["expected"]
    assert [a.status for a in result.attempts] == expected["statuses"]
    assert result.status == expected["status"] and len(server.requests) == expected["requests"]
    assert [[m["role"] for m in r["messages"]] for r in server.requests] == expected["roles"]
    for sent, recorded in zip(server.requests, exchanges, strict=True):
        assert {t["function"]["name"] for t in sent["tools"]} == {t["function"]["name"]
                                                                   for t in recorded["request"]["tools"]}
        # the verdicts the model read from its tools (draft checks too), status by status
        assert _tool_verdicts(sent) == _tool_verdicts(recorded["request"])
    for i, words in expected.get("tool_says", []):
        said = "\n".join(m["content"] for m in server.requests[i]["messages"] if m["role"] == "tool")
        assert words in said, said


def _tool_verdicts(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]).split(" — ", 1)[0].split("\n", 1)[0] for m in request["messages"] if m["role"] == "tool"]
