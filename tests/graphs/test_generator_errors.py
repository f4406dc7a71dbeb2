"""No exception escapes the loop: a generator that raises becomes an ``error`` attempt with its traceback, and
the next iteration still runs. A candidate that fails to import carries the error's type, message and line in
the attempt record, the Markdown report and the feedback the next generation reads."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from tritonsmith.agents.base import Candidate, GenerationRequest
from tritonsmith.graphs import optimize
from tritonsmith.graphs._report import markdown_report
from tritonsmith.graphs.testing import ScriptedChatModel, submit

RUN = {"device": "cpu", "trials": 1, "memory": False}


class _FailsFirst:
    """Raises on its first call (a generator bug), then offers a working kernel."""

    name = "flaky"

    def __init__(self, source: str) -> None:
        self.source = source
        self.requests: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> Candidate:
        self.requests.append(request)
        if len(self.requests) == 1:
            raise ValueError("view size is not compatible with input tensor's size and stride")
        return Candidate(source=self.source, note="second try")


def test_a_generator_that_raises_becomes_an_error_attempt_and_the_loop_goes_on(softmax_reference, softmax_candidate):
    gen = _FailsFirst(softmax_candidate)
    result = optimize(softmax_reference, generator=gen, iterations=2, **RUN)
    assert [a.status for a in result.attempts] == ["error", "correct"]
    first = result.attempts[0]
    assert first.source is None and first.reward == 0.0
    assert "ValueError: view size is not compatible" in first.message
    assert first.error is not None and "Traceback" in first.error and "in generate" in first.error
    assert result.ok and result.best_iteration == 2
    # the second request saw the failed attempt in its history
    assert [a.iteration for a in gen.requests[1].history] == [1]
    report = markdown_report(result)
    assert "| error |" in report and "the flaky generator failed" in report and "Traceback" in report


def test_a_generator_that_always_raises_ends_without_raising(softmax_reference):
    class Broken:
        name = "broken"

        def generate(self, request: GenerationRequest) -> Candidate:
            raise RuntimeError(f"bug on iteration {request.iteration}")

    result = optimize(softmax_reference, generator=Broken(), iterations=3, **RUN)
    assert result.status == "gave_up"
    assert [a.status for a in result.attempts] == ["error"] * 3
    assert "bug on iteration 3" in result.attempts[-1].message and "error" in result.reason


def test_builtin_variant_bug_is_an_error_attempt_and_the_next_variant_runs(softmax_reference, monkeypatch):
    """A failure inside the built-in generator's emitter (not an unsupported op) is reported with its
    traceback, and the next call moves on to another variant instead of failing the same way."""
    import tritonsmith.agents.builtin._emit as emit_module
    from tritonsmith.agents.base import Attempt
    from tritonsmith.agents.builtin import BuiltinGenerator
    from tritonsmith.core.problem import load_problem

    real = emit_module.emit_module
    calls: list[str] = []

    def flaky(name: str, source: str, traced: Any, plan: Any, cfgs: Any, variant: str) -> str:
        calls.append(variant)
        if len(calls) == 1:
            raise IndexError("tuple index out of range")
        return real(name, source, traced, plan, cfgs, variant)

    monkeypatch.setattr(emit_module, "emit_module", flaky)
    problem = load_problem(softmax_reference)
    gen = BuiltinGenerator()
    first = gen.generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert first.source is None and first.error is not None and first.variant is not None
    assert "IndexError: tuple index out of range" in first.note and "Traceback" in first.error
    assert not first.exhausted
    history = [Attempt(iteration=1, source=None, result=None, feedback=first.note, reward=0.0, generator="builtin",
                       variant=first.variant)]
    second = gen.generate(GenerationRequest(problem=problem, iteration=2, history=history, device="cpu"))
    assert second.source is not None and second.error is None
    assert second.variant != first.variant


_IMPORT_FAILS = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

_SCALE = undefined_scale * 2.0


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


@pytest.mark.parametrize("case", ["name_error", "syntax_error"])
def test_import_failure_names_type_message_and_line_everywhere(softmax_reference, softmax_candidate, case):
    bad = _IMPORT_FAILS if case == "name_error" else _IMPORT_FAILS.replace(
        "_SCALE = undefined_scale * 2.0", "w = self.network.0.weight")
    model = ScriptedChatModel(script=[submit(bad), submit(softmax_candidate)])
    result = optimize(softmax_reference, model=model, iterations=2, **RUN)
    rec = result.attempts[0]
    assert rec.status == "compile_error"
    if case == "name_error":
        want = ("NameError", "name 'undefined_scale' is not defined", "candidate line 6")
    else:
        want = ("SyntaxError", "invalid", "candidate line 6")
    for text in want:
        assert text in rec.message, rec.message  # the attempt record
    report = markdown_report(result)
    row = next(line for line in report.splitlines() if line.startswith("| 1 |"))
    for text in want:
        assert text in row, row  # the Markdown report's table
    # the feedback the model reads next: the answer to its submission (a tool result, or a user message)
    second = "\n".join(str(m.content) for m in model.seen[1][len(model.seen[0]):])
    for text in want:
        assert text in second, second
