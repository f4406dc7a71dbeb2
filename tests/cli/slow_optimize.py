"""An optimize function for ``bench --optimize-fn`` whose second problem runs a real evaluation that hangs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tritonsmith.examples import example_path
from tritonsmith.suite._task import OptimizeOutcome

MARK = "# the candidate's forward sleeps here"


def slow_kernel(pid_file: Path) -> str:
    """The bundled softmax candidate, which after its (real) kernel writes its pid and sleeps for 10 minutes."""
    source = example_path("softmax_triton.py").read_text()
    return source.replace("        return softmax(x)",
                          f"        out = softmax(x)  {MARK}\n"
                          f"        open({str(pid_file)!r}, 'w').write(str(__import__('os').getpid()))\n"
                          "        __import__('time').sleep(600)\n"
                          "        return out")


def slow_optimize(problem: Any, *, generator: Any, iterations: int, device: str, **settings: Any) -> OptimizeOutcome:
    from tritonsmith.evaluator import evaluate

    source = example_path("softmax_triton.py").read_text()
    if "slow" in problem.name:
        source = slow_kernel(Path(os.environ["SLOW_PID_FILE"]))
    result = evaluate(problem, source, device="cpu", trials=1)
    return OptimizeOutcome(best_source=source, best_result=result, iterations=1, generator="slow-fake")
