"""``run_suite`` on one settings object: resolved once per run, handed to every task; the old keyword
arguments still work, with a DeprecationWarning."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import tritonsmith.suite.settings as settings_module
from tritonsmith.suite import SuiteSettings, discover_problems, run_suite
from tritonsmith.suite._task import SuiteTask
from tritonsmith.suite.results import RunStore


class _RecordingPool:
    """Takes the tasks and runs none of them (what the runner hands a pool is the point here)."""

    def __init__(self) -> None:
        self.tasks: list[SuiteTask] = []

    def run(self, tasks: Sequence[SuiteTask], *, on_start: Callable[..., None], on_done: Callable[..., None],
            may_start: Callable[[], bool]) -> None:
        self.tasks.extend(tasks)


def module_optimize(problem: Any, **kwargs: Any) -> None:  # referenced by name, never called
    raise AssertionError("not run")


def test_settings_are_resolved_once_and_every_task_carries_them(suite_dir: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "visible_gpus", lambda: [])
    pool = _RecordingPool()
    asked = SuiteSettings(generator="builtin", iterations=2, trials=3, eval_timeout_s=41.0, policy="strict",
                          optimize_fn=module_optimize)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new form warns about nothing
        run_suite(discover_problems([suite_dir]), tmp_path / "run", asked, pool=pool)
    assert len(pool.tasks) == 4 and len({id(t.settings) for t in pool.tasks}) == 1
    got = pool.tasks[0].settings
    assert got.device == "cpu" and got.optimize_fn == f"{__name__}:module_optimize"
    assert (got.trials, got.eval_timeout_s, got.policy, got.iterations) == (3, 41.0, "strict", 2)
    manifest = RunStore(tmp_path / "run").read_manifest()
    assert manifest is not None and manifest.device == "cpu" and manifest.settings["trials"] == 3
    # a task crosses to its worker as JSON and comes back the same
    task = pool.tasks[2]
    assert SuiteTask.from_dict(json.loads(json.dumps(task.to_dict()))) == task
    assert (task.mode, task.device) == ("optimize", "cpu")


def test_the_old_keyword_arguments_warn_and_mean_the_same(suite_dir: Path, tmp_path: Path) -> None:
    new, old = _RecordingPool(), _RecordingPool()
    problems = discover_problems([suite_dir])
    run_suite(problems, tmp_path / "new", SuiteSettings(mode="eval", device="cpu", trials=2, eval_timeout_s=9.0,
                                                        scale=True), pool=new)
    with pytest.warns(DeprecationWarning, match=r"run_suite\(mode=, device=, trials=, timeout_s=, scale=\)"):
        run_suite(problems, tmp_path / "old", mode="eval", device="cpu", trials=2, timeout_s=9.0, scale=True,
                  pool=old)
    assert [t.settings for t in old.tasks] == [t.settings for t in new.tasks]
    assert old.tasks[0].settings.eval_timeout_s == 9.0
    with pytest.raises(TypeError, match="unexpected keyword argument.*trails"):
        run_suite(problems, tmp_path / "bad", trails=2, pool=_RecordingPool())


def test_bad_settings_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mode must be"):
        run_suite([], tmp_path / "a", SuiteSettings(mode="train"))
    with pytest.raises(ValueError, match="device must be"):
        run_suite([], tmp_path / "b", SuiteSettings(device="tpu"))
    with pytest.raises(ValueError, match="module-level"):
        SuiteSettings(optimize_fn=lambda problem, **kw: None).resolved()
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
