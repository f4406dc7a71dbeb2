"""``optimize``'s progress view: a live stage line with elapsed times on a terminal, only the rows when piped."""

from __future__ import annotations

import io
import re

from rich.console import Console

from tritonsmith.cli.optimize import _Progress

EVENTS = [
    {"event": "analyzed", "problem": "p", "device": "cpu", "bound": "memory-bound"},
    {"event": "generated", "iteration": 1, "generator": "builtin", "has_code": True},
    {"event": "evaluated", "iteration": 1, "generator": "builtin", "status": "wrong_output", "message": "max abs err 3",
     "speedup": None, "reward": 0.0, "reward_basis": "failed"},
    {"event": "decided", "action": "refine", "reason": "iteration 2 of 3 next"},
    {"event": "generated", "iteration": 2, "generator": "builtin", "has_code": True},
    {"event": "evaluated", "iteration": 2, "generator": "builtin", "status": "correct", "message": "correct on 5 trials",
     "speedup": None, "reward": 0.5, "reward_basis": "unmeasured"},
]


def _stages(console: Console) -> tuple[list[str], _Progress]:
    view = _Progress(console)
    seen = []
    with view:
        for event in EVENTS:
            view.on_event(event)
            seen.append(view.progress.tasks[0].description)
    return seen, view


def test_a_terminal_gets_a_live_stage_line() -> None:
    buffer = io.StringIO()
    seen, view = _stages(Console(file=buffer, force_terminal=True, width=160))
    assert not view.progress.disable
    assert seen == ["iteration 1: generating a candidate", "iteration 1: evaluating the builtin candidate",
                    "iteration 1: profiling and deciding", "iteration 2: generating a candidate",
                    "iteration 2: evaluating the builtin candidate", "iteration 2: profiling and deciding"]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    assert "total 0:0" in text  # the run's elapsed time beside the stage's own
    assert "iter 2 [builtin] " in text and "speed unmeasured (CPU)" in text


def test_piped_output_gets_the_rows_and_no_live_display() -> None:
    buffer = io.StringIO()
    _, view = _stages(Console(file=buffer, force_terminal=False, width=200))
    assert view.progress.disable
    lines = buffer.getvalue().splitlines()
    assert [line.split("]")[0] for line in lines] == ["  iter 1 [builtin", "  iter 2 [builtin"]
    assert "\x1b[" not in buffer.getvalue()
