"""Stand-ins the suite tests run inside worker processes (importable by name: tests/suite is on PYTHONPATH).

``fake_optimize`` behaves like the optimize loop without a generator or a GPU: it sleeps
``SUITE_FAKE_DELAY`` seconds, logs each call to ``SUITE_FAKE_CALLS`` (problem, pid, the GPU it saw)
and returns a correct verdict, or a wrong one for problems whose name contains ``wrong``.
"""

from __future__ import annotations

import json
import os
import time

from tritonsmith.core.problem import Problem
from tritonsmith.core.results import EvalResult, EvalStatus
from tritonsmith.suite import OptimizeOutcome
from tritonsmith.suite.pool import gpu_exclusive


def _log_call(problem: Problem, **extra: object) -> None:
    path = os.environ.get("SUITE_FAKE_CALLS")
    if path:
        line = {"problem": problem.name, "pid": os.getpid(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), **extra}
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")


def fake_optimize(problem: Problem, *, generator: object, iterations: int, device: str,
                  **settings: object) -> OptimizeOutcome:
    _log_call(problem, settings=sorted(settings))
    time.sleep(float(os.environ.get("SUITE_FAKE_DELAY", "0")))
    status = EvalStatus.WRONG_OUTPUT if "wrong" in problem.name else EvalStatus.CORRECT
    result = EvalResult(status=status, message=f"fake verdict: {status.value}", problem=problem.name, device=device,
                        device_name="fake", tolerance="kernelbench")
    return OptimizeOutcome(best_source="# fake kernel\n", best_result=result, iterations=iterations, generator="fake",
                           input_tokens=100, output_tokens=50, cost_usd=0.001)


def shared_gpu_optimize(problem: Problem, *, generator: object, iterations: int, device: str,
                  **settings: object) -> OptimizeOutcome:
    """Generation (sleep outside the lock) then 'evaluation' (sleep holding the GPU), each interval logged."""
    time.sleep(0.3)
    with gpu_exclusive():
        start = time.time()
        time.sleep(0.3)
        _log_call(problem, start=start, end=time.time())
    return fake_optimize(problem, generator=generator, iterations=iterations, device=device)


def crashing_optimize(problem: Problem, *, generator: object, iterations: int, device: str,
                  **settings: object) -> OptimizeOutcome:
    if "crash" in problem.name:
        os._exit(3)
    if "bug" in problem.name:
        raise RuntimeError("a bug in the optimize loop")
    return fake_optimize(problem, generator=generator, iterations=iterations, device=device)


def stoppable_optimize(problem: Problem, *, generator: object, iterations: int, device: str,
                       **settings: object) -> object:
    """The optimize loop's behaviour under a stop: one attempt finishes (verified unless the problem's name
    says ``none``), the next hangs until the worker's SIGTERM turns into KeyboardInterrupt, and the loop
    raises ``OptimizeInterrupted`` with the finished attempt, as ``tritonsmith.graphs.optimize`` does."""
    from tritonsmith.core.results import Attempt
    from tritonsmith.graphs import OptimizeInterrupted, OptimizeResult

    verified = "none" not in problem.name
    status = EvalStatus.CORRECT if verified else EvalStatus.WRONG_OUTPUT
    result = EvalResult(status=status, message=f"fake verdict: {status.value}", problem=problem.name, device=device,
                        device_name="fake", tolerance="kernelbench")
    attempt = Attempt(iteration=1, source="# fake kernel\n", generator="fake", result=result)
    _log_call(problem, phase="first attempt finished")
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        time.sleep(float(os.environ.get("SUITE_FAKE_UNWIND_S", "0")))  # a loop that takes a while to wind down
        raise OptimizeInterrupted(OptimizeResult(
            problem=problem.name, status="verified" if verified else "interrupted",
            reason="interrupted (Ctrl-C) after 1 finished attempt", device=device, generator="fake",
            best_source=attempt.source if verified else None, best_result=result if verified else None,
            best_reward=0.5 if verified else None, best_iteration=1 if verified else None,
            attempts=(attempt,))) from None
    raise AssertionError("the stop never came")
