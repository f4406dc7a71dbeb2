"""Run the optimize loop (or score given kernels) over a whole suite of problems, resumably.

``run_suite`` finds what is left to do in the run directory, spreads it over a pool of workers and
appends each finished problem to ``results.jsonl`` as it arrives. A rerun of the same call skips the
finished problems; a killed run loses only the problems that were in flight.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tritonsmith.suite._outcome import OptimizeOutcome
from tritonsmith.suite._task import OptimizeFn, SuiteTask
from tritonsmith.suite.pool import LocalPool, SuitePool, available_cores, plan_slots
from tritonsmith.suite.results import ERROR, ProblemRecord, RunManifest, RunStore
from tritonsmith.suite.settings import OPTIMIZE, SuiteSettings, optimize_fn_reference

__all__ = [
    "OptimizeFn",
    "OptimizeOutcome",
    "SuiteProblem",
    "SuiteProgress",
    "SuiteRun",
    "SuiteSettings",
    "discover_problems",
    "match_candidates",
    "optimize_fn_reference",
    "run_suite",
]

log = logging.getLogger(__name__)

_ABORT_AFTER = 3
_LEVEL = re.compile(r"level[_-]?(\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"^(\d+)_|problem[_-]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class SuiteProblem:
    """One problem of a suite: a stable key (``level1/19_ReLU``), its file and, for eval-only, its kernel."""

    key: str
    path: Path
    level: int | None
    candidate: Path | None = None


@dataclass(frozen=True, kw_only=True)
class SuiteRun:
    """What one ``run_suite`` call did. ``records`` holds every finished problem of the run directory."""

    run_dir: Path
    records: list[ProblemRecord]
    ran: int
    skipped: int
    not_started: list[str] = field(default_factory=list)
    wall_s: float = 0.0


class SuiteProgress(Protocol):
    """Told about the run as it goes (the CLI shows a rich progress bar; the default logs)."""

    def begin(self, total: int, skipped: int) -> None: ...
    def started(self, key: str, worker: str) -> None: ...
    def finished(self, record: ProblemRecord) -> None: ...
    def end(self) -> None: ...


class LogProgress:
    def begin(self, total: int, skipped: int) -> None:
        log.info("suite: %d problems to run, %d already finished", total, skipped)

    def started(self, key: str, worker: str) -> None:
        log.info("suite: %s started on %s", key, worker)

    def finished(self, record: ProblemRecord) -> None:
        log.info("suite: %s -> %s (%.1f s)", record.key, record.status, record.wall_s)

    def end(self) -> None:
        pass


def discover_problems(paths: Sequence[str | Path]) -> list[SuiteProblem]:
    """KernelBench-format files named directly or found (recursively) under directories, in suite order."""
    found: dict[str, SuiteProblem] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            prefix = (path.resolve().name + "/") if _LEVEL.fullmatch(path.resolve().name) else ""
            files = [(f, prefix + f.relative_to(path).with_suffix("").as_posix()) for f in sorted(path.rglob("*.py"))
                     if not f.name.startswith("_") and _looks_like_problem(f)]
        elif path.is_file():
            files = [(path, _key_for_file(path))]
        else:
            raise FileNotFoundError(f"no such problem file or directory: {path}")
        for file, key in files:
            if key in found and found[key].path != file.resolve():
                raise ValueError(f"two problems share the key {key!r}: {found[key].path} and {file}")
            found[key] = SuiteProblem(key=key, path=file.resolve(), level=_level_of(file))
    return sorted(found.values(), key=_suite_order)


def match_candidates(problems: Sequence[SuiteProblem], candidates: str | Path) -> list[SuiteProblem]:
    """Pair each problem with its kernel under ``candidates``: same relative path, else same file name,
    else same level and problem number (``level_1_problem_19_*.py``). Unmatched problems keep ``None``."""
    root = Path(candidates)
    if not root.is_dir():
        raise FileNotFoundError(f"candidates directory not found: {root}")
    files = [f for f in sorted(root.rglob("*.py")) if not f.name.startswith("_")]
    by_rel = {f.relative_to(root).with_suffix("").as_posix(): f for f in files}
    by_stem: dict[str, list[Path]] = {}
    by_id: dict[tuple[int | None, int], list[Path]] = {}
    for f in files:
        by_stem.setdefault(f.stem, []).append(f)
        number = _number_of(f.stem)
        if number is not None:
            by_id.setdefault((_level_of(f), number), []).append(f)
    out = []
    for p in problems:
        number = _number_of(p.path.stem)
        options = ([by_rel[p.key]] if p.key in by_rel else by_stem.get(p.path.stem)
                   or (by_id.get((p.level, number), []) if number is not None else []))
        if len(options) > 1:
            log.warning("%s: %d candidate kernels match; using %s", p.key, len(options), options[0])
        out.append(SuiteProblem(key=p.key, path=p.path, level=p.level,
                                candidate=options[0].resolve() if options else None))
    return out


def run_suite(problems: Sequence[SuiteProblem], out: str | Path, settings: SuiteSettings | None = None, *,
              pool: SuitePool | None = None, progress: SuiteProgress | None = None, **legacy: Any) -> SuiteRun:
    """Run every unfinished problem of ``problems`` into the run directory ``out``, as ``settings`` say
    (see :class:`SuiteSettings`; default: optimize with the loop's default generator on any device).

    ``pool`` runs the tasks (default: local worker processes, one per GPU slot or core); ``progress`` is told
    as problems start and finish. Raises :class:`RunConfigError` when ``out`` holds a run started with other
    settings. The keyword arguments of the settings (``mode=``, ``trials=``, ``timeout_s=``...) are still
    accepted, with a :class:`DeprecationWarning`.
    """
    if legacy:
        settings = SuiteSettings.from_keywords(settings, legacy)
    s = (settings or SuiteSettings()).resolved()
    store = RunStore(out)
    manifest = RunManifest(mode=s.mode, device=s.device, generator=s.generator if s.mode == OPTIMIZE else None,
                           iterations=s.iterations if s.mode == OPTIMIZE else 1, problems=tuple(p.key for p in problems),
                           settings={"trials": s.trials, "tolerance": s.tolerance, "policy": s.policy,
                                     "scale": s.scale, "use_memory": s.use_memory})
    store.open_run(manifest)
    done = store.finished_keys()
    todo = [p for p in problems if p.key not in done]
    tasks = [SuiteTask(key=p.key, problem_path=str(p.path), level=p.level, run_dir=str(store.run_dir.resolve()),
                       settings=s, candidate_path=str(p.candidate) if p.candidate else None) for p in todo]
    if pool is None:
        workers = s.workers
        if s.device == "cpu":  # no more interpreter workers than cores or problems
            workers = min(workers or available_cores(), max(1, len(tasks)))
        slots = plan_slots(s.device, workers=workers, slots_per_gpu=s.slots_per_gpu, lock_dir=store.run_dir)
        pool = LocalPool(slots, log_dir=store.run_dir / "logs")
    return _drive(pool, tasks, store, skipped=len(problems) - len(todo), time_budget_s=s.time_budget_s,
                  progress=progress or LogProgress())


def _drive(pool: SuitePool, tasks: list[SuiteTask], store: RunStore, *, skipped: int, time_budget_s: float | None,
           progress: SuiteProgress) -> SuiteRun:
    start = time.monotonic()
    started: set[str] = set()
    ran = 0
    first: list[ProblemRecord] = []

    def may_start() -> bool:
        if len(first) >= _ABORT_AFTER and all(r.status == ERROR for r in first):
            return False  # a broken setup (no model configured, a missing module): fail once, not N times
        return time_budget_s is None or time.monotonic() - start < time_budget_s

    def on_start(task: SuiteTask, worker: str) -> None:
        started.add(task.key)
        progress.started(task.key, worker)

    def on_done(record: ProblemRecord) -> None:
        nonlocal ran
        store.append(record)
        ran += 1
        if len(first) < _ABORT_AFTER:
            first.append(record)
        progress.finished(record)

    progress.begin(len(tasks), skipped)
    try:
        if tasks:
            pool.run(tasks, on_start=on_start, on_done=on_done, may_start=may_start)
    finally:
        progress.end()
    not_started = [t.key for t in tasks if t.key not in started]
    if not_started and len(first) >= _ABORT_AFTER and all(r.status == ERROR for r in first):
        log.error("stopped: the first %d problems all failed inside the runner (%s); fix that and rerun",
                  _ABORT_AFTER, first[0].message)
    elif not_started:
        log.warning("time budget spent: %d problems not started (rerun to continue)", len(not_started))
    return SuiteRun(run_dir=store.run_dir, records=store.records(), ran=ran, skipped=skipped,
                    not_started=not_started, wall_s=time.monotonic() - start)


def _looks_like_problem(path: Path) -> bool:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return "get_init_inputs" in text and "class Model" in text


def _key_for_file(path: Path) -> str:
    parent = path.resolve().parent.name
    return f"{parent}/{path.stem}" if _LEVEL.fullmatch(parent) else path.stem


def _level_of(path: Path) -> int | None:
    for part in reversed(path.resolve().parts[:-1]):
        m = _LEVEL.fullmatch(part)
        if m:
            return int(m.group(1))
    m = _LEVEL.search(path.stem)
    return int(m.group(1)) if m else None


def _number_of(stem: str) -> int | None:
    m = _NUMBER.search(stem)
    return int(m.group(1) or m.group(2)) if m else None


def _suite_order(p: SuiteProblem) -> tuple[int, int, str]:
    number = _number_of(p.path.stem)
    return (p.level if p.level is not None else 1 << 30, number if number is not None else 1 << 30, p.key)
