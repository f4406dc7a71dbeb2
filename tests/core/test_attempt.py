"""One attempt type from generator to suite record: ``core.results.Attempt`` and its views."""

from __future__ import annotations

import json
import random

from tritonsmith.core.results import Attempt, EvalResult, EvalStatus


def _result(status: EvalStatus) -> EvalResult:
    return EvalResult(status=status, message=f"{status.value} on 3 trials", problem="p", device="cuda",
                      device_name="NVIDIA H200", tolerance="kernelbench")


def _judged(rng: random.Random) -> Attempt:
    return Attempt(iteration=rng.randint(1, 9), generator="builtin", source="class ModelNew: ...\n" * 3,
                   result=_result(EvalStatus.CORRECT), feedback="correct; 1.31x torch.compile", reward=rng.random(),
                   reward_basis="compile", speedup=0.5 + rng.random(), status="correct", message="m" * 417,
                   note="mm-128x128", variant="mm-128x128", profile="memory-bound", torch_ops=("logsumexp",),
                   duplicate_of=None)


def test_the_dict_view_round_trips_through_json() -> None:
    rng = random.Random(7)
    attempt = _judged(rng)
    data = json.loads(json.dumps(attempt.to_dict()))
    assert data["result"]["status"] == "correct" and data["torch_ops"] == ["logsumexp"]
    assert Attempt.from_dict(data) == attempt


def test_summary_and_trail_are_views_with_fewer_fields() -> None:
    attempt = _judged(random.Random(11))
    summary = attempt.summary()
    assert set(summary) == {"iteration", "generator", "status", "message", "reward", "reward_basis", "speedup",
                            "source", "note", "variant", "torch_ops", "error"}
    trail = attempt.trail()
    assert set(trail) == {"iteration", "generator", "variant", "status", "speedup_vs_compile", "reward", "message"}
    assert trail["speedup_vs_compile"] == attempt.speedup and len(trail["message"]) == 300
    assert trail["reward"] == round(attempt.reward, 4)
    back = Attempt.from_dict(summary)
    assert back.source == attempt.source and back.result is None and back.torch_ops == ("logsumexp",)
    again = Attempt.from_dict(trail)
    assert again.speedup == attempt.speedup and again.source is None and again.trail() == trail


def test_older_graph_records_load() -> None:
    """The graph's former AttemptRecord (optional keys absent) and PendingCandidate dicts, as checkpoints hold them."""
    record = {"iteration": 2, "generator": "llm", "source": None, "status": "model_error",
              "message": "the model server timed out", "result": None, "feedback": "timed out", "reward": 0.0,
              "reward_basis": "none", "speedup": None, "note": "model error: timed out", "model_error_fatal": True}
    attempt = Attempt.from_dict(record)
    assert attempt.status == "model_error" and attempt.model_error_fatal and attempt.torch_ops == ()
    assert attempt.profile is None and attempt.duplicate_of is None and attempt.judged
    pending = Attempt.from_dict({"iteration": 3, "source": "x = 1\n", "generator": "builtin", "note": "tiles",
                                 "variant": None, "error": None, "model_error": None, "model_error_fatal": False})
    assert not pending.judged and pending.result is None and pending.source == "x = 1\n"


def test_a_failed_attempts_trail_keeps_the_end_of_its_error() -> None:
    traceback = "\n".join([f"  frame {i}" for i in range(40)] + [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB"])
    result = EvalResult(status=EvalStatus.CRASHED, message="the worker died (exit code 1 before reporting a result)",
                        error=traceback, problem="p", device="cuda", device_name="NVIDIA H100", tolerance="kernelbench")
    crashed = Attempt(iteration=1, generator="builtin", variant="default", status="crashed", result=result,
                      message=result.message)
    trail = crashed.trail()
    assert trail["error"].endswith("Tried to allocate 8.00 GiB") and "frame 39" in trail["error"]
    assert "frame 0\n" not in trail["error"] and len(trail["error"].splitlines()) == 12
    assert Attempt.from_dict(trail).trail() == trail
    broken = Attempt(iteration=2, generator="builtin", status="generator_error", error="Traceback\nKeyError: 'x'")
    assert broken.trail()["error"] == "Traceback\nKeyError: 'x'"
