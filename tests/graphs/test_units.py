"""Reward, reducers, routing and settings: pure functions, with synthetic GPU results where timing matters."""

from __future__ import annotations

import math

import pytest

from tritonsmith.core.results import BenchmarkReport, EvalResult, EvalStatus, Timing
from tritonsmith.core.settings import KernelContext, Settings
from tritonsmith.graphs.reward import UNMEASURED_REWARD, reward_for, speedup_reward
from tritonsmith.graphs.routing import decide, route_after_decide
from tritonsmith.graphs.state import add_usage, keep_best, merge_attempts, merge_notes


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p20_ms=ms * 0.98, p80_ms=ms * 1.02, reps=50)


def _gpu_result(candidate_ms: float, compiled_ms: float | None = 1.0, status=EvalStatus.CORRECT) -> EvalResult:
    bench = BenchmarkReport(candidate=_timing(candidate_ms), eager=_timing(2.0),
                            compiled=_timing(compiled_ms) if compiled_ms else None, compile_mode="default")
    return EvalResult(status=status, message="m", problem="p", device="cuda", device_name="NVIDIA H200",
                      tolerance="kernelbench", benchmark=bench if status is EvalStatus.CORRECT else None)


def _rec(iteration: int, reward: float, basis: str = "torch.compile", speedup: float | None = None, status="correct"):
    return {"iteration": iteration, "generator": "llm", "source": f"s{iteration}", "status": status, "message": "m",
            "result": None, "feedback": "", "reward": reward, "reward_basis": basis, "speedup": speedup, "note": ""}


def test_reward_is_logistic_in_log_speedup():
    assert speedup_reward(1.0) == 0.5
    assert speedup_reward(3.0) == pytest.approx(1 / (1 + math.exp(-math.log(3.0))))
    assert 0.9 < speedup_reward(12.0) < 1.0 and 0.0 < speedup_reward(0.5) < 0.5
    with pytest.raises(ValueError):
        speedup_reward(0.0)


def test_reward_for_results():
    r = reward_for(_gpu_result(0.5))  # 2x faster than torch.compile
    assert r.basis == "torch.compile" and r.speedup == pytest.approx(2.0) and r.value == pytest.approx(2 / 3)
    eager = reward_for(_gpu_result(0.5, compiled_ms=None))  # torch.compile failed: eager is the basis
    assert eager.basis == "eager" and eager.speedup == pytest.approx(4.0)
    assert reward_for(_gpu_result(0.5, status=EvalStatus.WRONG_OUTPUT)).value == 0.0
    assert reward_for(None).basis == "failed"
    cpu = EvalResult(status=EvalStatus.CORRECT, message="ok", problem="p", device="cpu", device_name="CPU",
                     tolerance="kernelbench")
    assert reward_for(cpu).value == UNMEASURED_REWARD and reward_for(cpu).basis == "unmeasured"
    assert "unmeasured" in reward_for(cpu).note


def test_reducers_keep_history_and_the_best():
    history = merge_attempts([], [_rec(1, 0.0, status="wrong_output")])
    history = merge_attempts(history, [_rec(2, 0.6)])
    profiled = {**_rec(2, 0.6), "profile": "memory-bound at 40% of the floor"}
    history = merge_attempts(history, [profiled])
    assert [a["iteration"] for a in history] == [1, 2] and history[1]["profile"].startswith("memory")
    best = keep_best(None, _rec(2, 0.6))
    assert keep_best(best, _rec(3, 0.0, status="crashed")) is best  # a failure never replaces the best
    assert keep_best(best, _rec(3, 0.55)) is best
    assert keep_best(best, _rec(4, 0.7))["iteration"] == 4
    assert keep_best(_rec(1, 0.5, "unmeasured"), _rec(2, 0.5, "unmeasured"))["iteration"] == 1  # tie: earliest
    usage = add_usage(None, {"input_tokens": 10, "output_tokens": 5, "cost_usd": None, "calls": 1})
    usage = add_usage(usage, {"input_tokens": 1, "output_tokens": 2, "cost_usd": 0.25, "calls": 1})
    assert usage == {"input_tokens": 11, "output_tokens": 7, "cost_usd": 0.25, "calls": 2}
    assert merge_notes(["a"], ["a", "b"]) == ["a", "b"]


def test_decide_refines_for_speed_on_a_gpu_until_the_target_or_the_limit():
    s = Settings(iterations=3)
    slow = _rec(1, speedup_reward(0.8), speedup=0.8)
    state = {"attempts": [slow], "best": slow}
    assert decide(state, s)["action"] == "refine"
    fast = _rec(2, speedup_reward(1.6), speedup=1.6)
    state = {"attempts": [slow, fast], "best": fast}
    assert decide(state, Settings(iterations=3, target_speedup=1.5)) == {
        "action": "finish", "reason": "target reached: 1.60x vs torch.compile (target 1.50x)"}
    assert decide(state, s)["action"] == "refine"
    done = {"attempts": [slow, fast, _rec(3, 0.0, status="timeout")], "best": fast}
    d = decide(done, s)
    assert d["action"] == "finish" and "iteration limit reached (3/3)" in d["reason"] and "iteration 2" in d["reason"]
    assert route_after_decide({"decision": d}) == "remember"


def test_decide_gives_up_with_the_last_failure_and_on_exhaustion():
    failed = [_rec(1, 0.0, status="compile_error"), {**_rec(2, 0.0, status="wrong_output"), "message": "bad values"}]
    d = decide({"attempts": failed}, Settings(iterations=2))
    assert d["action"] == "give_up" and d["reason"].endswith("last attempt: wrong_output: bad values")
    assert route_after_decide({"decision": d}) == "__end__"
    d = decide({"attempts": failed[:1], "exhausted": True}, Settings(iterations=5))
    assert d["action"] == "give_up" and "no further ideas" in d["reason"]
    user_only = [{**_rec(0, 0.0, status="wrong_output"), "generator": "user"}]
    assert decide({"attempts": user_only}, Settings(iterations=1))["action"] == "refine"  # --from is free


def test_settings_precedence_argument_context_environment_default():
    env = {"TRITONSMITH_ITERATIONS": "7", "TRITONSMITH_MODEL": "env-model", "OPENAI_API_KEY": "sk-env",
           "TRITONSMITH_DEVICE": "cpu", "TRITONSMITH_SCALE": "yes"}
    s = Settings.resolve(KernelContext(iterations=2), {"iterations": 4, "model": "ctx-model"}, env=env)
    assert (s.iterations, s.model, s.api_key, s.device, s.scale) == (2, "ctx-model", "sk-env", "cpu", True)
    assert s.trials == 5 and s.llm_timeout_s > 0 and s.max_retries == 2  # defaults
    assert Settings.resolve(env={}).llm_configured is False
    assert Settings.resolve(env={"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}).llm_configured
    assert "sk-env" not in repr(s) and s.public_dict()["api_key"] == "***"
    class Foreign:  # a parent graph's own context schema: unknown fields are skipped
        user_id = "u1"
    assert Settings.resolve(None, Foreign(), env={}).iterations == 3
    with pytest.raises(ValueError, match="TRITONSMITH_ITERATIONS"):
        Settings.resolve(env={"TRITONSMITH_ITERATIONS": "many"})
    with pytest.raises(ValueError, match="device"):
        Settings(device="tpu")
