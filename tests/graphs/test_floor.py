"""The floor (``graphs/_floor.py``): a kernel slower than torch.compile beyond noise is never kept as the best
while a verified one faster beyond noise exists; when all are slower the result, the optimize report, the
suite record and the suite report say so. Synthetic GPU records: nothing is timed here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tritonsmith.core.contract import HYBRID_REWARD_FACTOR, JUDGED_FP32_NOTE
from tritonsmith.core.results import BenchmarkReport, ChecksReport, EvalResult, EvalStatus, Timing
from tritonsmith.core.settings import Settings
from tritonsmith.graphs._floor import NOISE, compile_speed, floor_prefers, slower_line
from tritonsmith.graphs.optimizer import OptimizeResult
from tritonsmith.graphs.reward import speedup_reward
from tritonsmith.graphs.state import keep_best
from tritonsmith.suite._adapt import outcome_from_optimize_result
from tritonsmith.suite.report import write_report
from tritonsmith.suite.results import ProblemRecord, RunStore


def _result(speedup: float, ci: tuple[float, float] | None) -> EvalResult:
    t = lambda ms: Timing(median_ms=ms, p20_ms=ms * 0.99, p80_ms=ms * 1.01, reps=40)  # noqa: E731
    bench = BenchmarkReport(candidate=t(1.0), eager=t(1.7), compiled=t(speedup), compile_mode="default",
                            speedup_ci_vs_compile=ci)
    return EvalResult(status=EvalStatus.CORRECT, message="correct on 5 trials", problem="p", device="cuda",
                      device_name="NVIDIA H200", tolerance="kernelbench", benchmark=bench)


def _rec(iteration: int, speedup: float, ci: tuple[float, float] | None = None, *, hybrid: bool = False,
         profile: str | None = None) -> dict[str, Any]:
    reward = speedup_reward(speedup) * (HYBRID_REWARD_FACTOR if hybrid else 1.0)
    rec: dict[str, Any] = {"iteration": iteration, "generator": "builtin", "source": f"s{iteration}",
                           "status": "correct", "message": "correct on 5 trials",
                           "result": _result(speedup, ci).to_dict(), "feedback": "", "reward": reward,
                           "reward_basis": "torch.compile", "speedup": speedup, "note": "",
                           "variant": f"v{iteration}"}
    if profile is not None:
        rec["profile"] = profile
    return rec


def test_compile_speed_reads_the_interval_or_assumes_noise() -> None:
    s = compile_speed(_rec(1, 0.81, (0.79, 0.83)))
    assert s is not None and (s.speedup, s.low, s.high) == (0.81, 0.79, 0.83) and s.slower
    bare = compile_speed(_rec(1, 0.9))
    assert bare is not None and bare.low == pytest.approx(0.9 * (1 - NOISE)) and bare.high < 1.0
    assert compile_speed({**_rec(1, 0.5), "reward_basis": "eager"}) is None  # torch.compile failed
    assert compile_speed({**_rec(1, 0.5), "reward": 0.0, "status": "wrong_output"}) is None
    assert compile_speed({**_rec(1, 0.5), "reward_basis": "unmeasured", "speedup": None}) is None
    assert compile_speed(None) is None
    assert not compile_speed(_rec(1, 0.98, (0.95, 1.01))).slower  # within noise of parity


def test_faster_hybrid_replaces_a_slower_pure_kernel_the_reward_would_keep() -> None:
    """0.80x pure Triton (reward 0.444) against a 0.95x hybrid (0.9 x 0.487 = 0.438): the reward alone keeps
    the slower kernel; the floor keeps the faster one, whichever came first."""
    pure, hybrid = _rec(1, 0.80, (0.78, 0.82)), _rec(2, 0.95, (0.93, 0.97), hybrid=True)
    assert pure["reward"] > hybrid["reward"]
    assert floor_prefers(hybrid, pure) is True and floor_prefers(pure, hybrid) is False
    assert keep_best(pure, hybrid) is hybrid
    assert keep_best(hybrid, pure) is hybrid


def test_floor_has_no_say_within_noise_or_above_parity() -> None:
    slow, close = _rec(1, 0.80, (0.70, 0.90)), _rec(2, 0.86, (0.85, 0.95), hybrid=True)
    assert floor_prefers(close, slow) is None  # the intervals overlap: the reward decides
    assert keep_best(slow, close) is slow
    fast, faster_hybrid = _rec(3, 1.20, (1.18, 1.22)), _rec(4, 1.30, (1.28, 1.32), hybrid=True)
    assert floor_prefers(faster_hybrid, fast) is None  # not slower than torch.compile: the reward decides
    assert keep_best(fast, faster_hybrid) is fast
    eager_only = {**_rec(5, 3.0), "reward_basis": "eager"}
    assert floor_prefers(eager_only, slow) is None


def test_slower_line_when_every_verified_variant_loses() -> None:
    attempts = [_rec(1, 0.70, (0.69, 0.71)), {**_rec(2, 0.1), "reward": 0.0, "status": "wrong_output"},
                _rec(3, 0.82, (0.80, 0.84), profile="headline\nhints: few_programs, spills"), _rec(4, 0.75)]
    best = attempts[2]
    line = slower_line(best, attempts)
    assert line == ("slower than torch.compile: 0.82x (95% CI 0.80-0.84; best of 3 verified variants); "
                    "profiler: few_programs, spills")
    unprofiled = slower_line(attempts[0], attempts[:1])
    assert unprofiled is not None and "best of 1 verified variant)" in unprofiled and "not run on it" in unprofiled
    assert slower_line(_rec(1, 0.98, (0.95, 1.01)), []) is None  # parity within noise is not "slower"
    assert slower_line(_rec(1, 1.3), []) is None and slower_line(None, []) is None


def test_slower_line_says_when_torch_compile_was_timed_in_tf32_against_a_float32_kernel() -> None:
    """The evaluator's own note (the reference re-run in full float32 because PyTorch used TF32) is the reason
    the line gives without a profile; a kernel judged without it gets no such reason."""
    best = _rec(1, 0.16, (0.15, 0.17))
    checks = ChecksReport(policy="hybrid", notes=(JUDGED_FP32_NOTE,))
    best["result"] = replace(_result(0.16, (0.15, 0.17)), checks=checks).to_dict()
    line = slower_line(best, [best])
    assert line is not None and "torch.compile ran its convolutions/matmuls in TF32 (one tensor-core pass)" in line
    assert line.endswith("profiler: not run on it")
    assert "TF32" not in (slower_line(_rec(1, 0.16, (0.15, 0.17)), []) or "")


def _state(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    best = None
    for a in attempts:
        best = keep_best(best, a)  # type: ignore[arg-type]
    return {"problem": {"name": "p", "source": ""}, "attempts": attempts, "best": best, "device": "cuda",
            "generator": "builtin", "decision": {"action": "finish", "reason": "iteration limit reached"}}


def test_optimize_result_and_reports_carry_the_slower_line(tmp_path: Path) -> None:
    settings = Settings()
    result = OptimizeResult.from_state(_state([_rec(1, 0.80, (0.78, 0.82)), _rec(2, 0.66, (0.64, 0.68))]),
                                       settings)  # type: ignore[arg-type]
    assert result.best_iteration == 1
    assert result.slower is not None and result.slower.startswith("slower than torch.compile: 0.80x")
    assert f"- **floor**: {result.slower}" in result.to_markdown()
    assert result.to_dict()["slower"] == result.slower
    fast = OptimizeResult.from_state(_state([_rec(1, 1.4, (1.35, 1.45))]), settings)  # type: ignore[arg-type]
    assert fast.slower is None and "**floor**" not in fast.to_markdown()

    out = outcome_from_optimize_result(result)
    assert out.slower == result.slower
    record = ProblemRecord(key="level2/p", problem="p", level=2, status="correct", message="m", mode="optimize",
                           device="cuda", result=result.best_result, slower=out.slower)
    assert ProblemRecord.from_dict(record.to_dict()).slower == result.slower
    old = record.to_dict()
    del old["slower"]  # rows written before the floor still load
    assert ProblemRecord.from_dict(old).slower is None
    store = RunStore(tmp_path)
    store.append(record)
    store.append(replace(record, key="level2/q", problem="q", slower=None))
    write_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "1 verified kernels are slower than torch.compile beyond noise" in md and f"`level2/p`: {result.slower}" in md
