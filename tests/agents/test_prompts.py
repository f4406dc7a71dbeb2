"""What the model is shown: problem, hardware, memory, the user's kernel, and trimmed findings."""

from __future__ import annotations

from tritonsmith.agents.base import Attempt, GenerationRequest
from tritonsmith.agents.prompts import HARDWARE_FACTS, SYSTEM_PROMPT, render_request, trim
from tritonsmith.core.problem import Problem
from tritonsmith.core.results import EvalResult, EvalStatus


def _result(status: EvalStatus, message: str) -> EvalResult:
    return EvalResult(status=status, message=message, problem="p", device="cpu", device_name="CPU",
                      tolerance="kernelbench")


def test_first_prompt_has_problem_hardware_and_memory(softmax_reference):
    req = GenerationRequest(problem=Problem.from_file(softmax_reference), iteration=1, device="cuda",
                            analysis="bound: memory-bound", examples=("def _kernel_from_memory(): ...",),
                            start_from="class ModelNew: pass  # user's")
    text = render_request(req)
    assert "torch.softmax(x, dim=1)" in text and "bound: memory-bound" in text
    assert HARDWARE_FACTS["cuda"] in text and "_kernel_from_memory" in text
    assert "The user's kernel to start from" in text and "user's" in text
    assert "submit_kernel" in SYSTEM_PROMPT and "ModelNew" in SYSTEM_PROMPT


def test_refinement_shows_the_last_failure_in_full_and_older_ones_in_a_line(softmax_reference):
    long_error = "Traceback\n" + "frame\n" * 2000 + "NameError: name 'tl_sum' is not defined (candidate line 12)"
    history = (
        Attempt(iteration=1, source="class ModelNew: v1", result=_result(EvalStatus.CORRECT, "correct on 1 trials"),
                feedback="status: correct", reward=0.5, generator="llm"),
        Attempt(iteration=2, source="class ModelNew: v2", result=_result(EvalStatus.COMPILE_ERROR, "did not load"),
                feedback=long_error, reward=0.0, generator="llm"),
    )
    req = GenerationRequest(problem=Problem.from_file(softmax_reference), iteration=3, history=history,
                            device="cpu")
    text = render_request(req)
    assert "- iteration 1 (llm): correct: correct on 1 trials" in text
    assert "Your previous attempt (iteration 2, compile_error)" in text and "class ModelNew: v2" in text
    assert "NameError: name 'tl_sum'" in text and "characters trimmed" in text  # the tail survives trimming
    assert "Best verified so far: iteration 1" in text
    assert HARDWARE_FACTS["cpu"] in text
    assert len(text) < 12000


def test_trim_keeps_head_and_tail():
    s = "a" * 500 + "b" * 500
    out = trim(s, 200)
    assert out.startswith("a") and out.endswith("b") and len(out) < 260
    assert trim("short", 200) == "short"
