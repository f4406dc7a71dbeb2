"""A suite run on disk: ``run.json`` (what was asked) and ``results.jsonl`` (one line per finished problem).

Only the coordinator process appends, one ``write`` of one complete line per problem followed by
``fsync``, so a killed run leaves every finished problem intact and at most a torn last line, which
the next append cuts off. Reading keeps the last record of each problem.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tritonsmith.core.results import Attempt, EvalResult, EvalStatus
from tritonsmith.core.version import code_version

__all__ = [
    "ERROR",
    "INVALID_PROBLEM",
    "NO_CANDIDATE",
    "ProblemRecord",
    "RunConfigError",
    "RunManifest",
    "RunStore",
    "STOPPED",
]

log = logging.getLogger(__name__)

NO_CANDIDATE = "no_candidate"
"""The generator produced nothing, or eval-only found no kernel for the problem (a failure)."""
INVALID_PROBLEM = "invalid_problem"
"""The reference itself is malformed (not counted against the kernels, reported apart)."""
ERROR = "error"
"""The runner itself failed on this problem (a bug or a dead worker): retried on resume."""
STOPPED = "stopped"
"""The run's hard stop or Ctrl-C came before this problem's first verdict: no failure of the kernels or of the
runner, counted as not verified; retried on resume."""

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "run.json"


class RunConfigError(ValueError):
    """A rerun asked for different settings than the run directory was started with."""


@dataclass(frozen=True, kw_only=True)
class ProblemRecord:
    """The outcome of one problem in a suite run: its best candidate's verdict and what it cost."""

    key: str
    problem: str
    level: int | None
    status: str
    message: str
    mode: str
    device: str
    result: EvalResult | None = None
    iterations: int = 0
    generator: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    candidate_file: str | None = None
    error: str | None = None
    scaling_note: str | None = None
    wall_s: float = 0.0
    work_s: float = 0.0
    worker: str = ""
    attempts: tuple[dict[str, Any], ...] = ()  # each attempt's Attempt.trail() view, as results.jsonl keeps it
    slower: str | None = None  # "slower than torch.compile: ..." when even the best verified kernel loses
    version: str = field(default_factory=code_version)
    finished_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def ok(self) -> bool:
        return self.status == EvalStatus.CORRECT.value

    @property
    def finished(self) -> bool:
        """Runner errors and stopped problems are retried on resume; every verdict (right or wrong) is final."""
        return self.status not in (ERROR, STOPPED)

    @property
    def timed(self) -> bool:
        """Speedups exist only for correct candidates timed on a GPU (never on the CPU interpreter)."""
        return self.ok and self.result is not None and self.result.benchmark is not None and self.device == "cuda"

    @property
    def speedup_vs_eager(self) -> float | None:
        return self.result.speedup_vs_eager if self.timed and self.result else None

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.result.speedup_vs_compile if self.timed and self.result else None

    @property
    def trail(self) -> tuple[Attempt, ...]:
        """The attempts as :class:`~tritonsmith.core.results.Attempt` (the fields a trail keeps; no source)."""
        return tuple(Attempt.from_dict(a) for a in self.attempts)

    @property
    def overhead_s(self) -> float:
        """Time the runner spent on this problem outside the optimize/evaluate call."""
        return max(0.0, self.wall_s - self.work_s)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["result"] = self.result.to_dict() if self.result else None
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemRecord:
        d = dict(data)
        d["result"] = EvalResult.from_dict(d["result"]) if d.get("result") else None
        d["attempts"] = tuple(d.get("attempts") or ())
        d.setdefault("version", "unknown")  # rows written before records carried the code version
        return cls(**d)

    def with_timing(self, *, wall_s: float, worker: str) -> ProblemRecord:
        return replace(self, wall_s=wall_s, worker=worker)


def _code_identity(version: str) -> str:
    """The source digest of a ``code_version`` string (``0.1.0+g1a2b3c4.dirty.s5d6e7f80`` -> ``s5d6e7f80``),
    or the string itself where it has none (a wheel's ``0.1.0``, ``unknown``)."""
    last = version.rsplit(".", 1)[-1]
    return last if "+g" in version and last.startswith("s") and len(last) == 9 else version


@dataclass(frozen=True, kw_only=True)
class RunManifest:
    """The settings a run directory was started with; a rerun must match them to resume.

    ``settings`` holds the evaluator's settings (trials, tolerance, policy, scale, use_memory); every one
    of them, like mode, device, generator, iterations and the code version, changes results."""

    mode: str
    device: str
    generator: str | None
    iterations: int
    problems: tuple[str, ...]
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    settings: dict[str, Any] = field(default_factory=dict)
    version: str = field(default_factory=code_version)

    def identity(self) -> dict[str, Any]:
        """Everything that changes a result: a resume must match it exactly. The code counts by its source
        digest (``core.version``): a commit of docs or results alone lets a run resume, a changed line of
        the package does not."""
        return {"mode": self.mode, "device": self.device, "generator": self.generator,
                "iterations": self.iterations, **self.settings, "version": _code_identity(self.version)}

    def differences(self, other: RunManifest) -> list[str]:
        """``name: was X, now Y`` for each result-changing setting ``other`` changes (versions in full)."""
        mine, theirs = self.identity(), other.identity()
        was, now = {**mine, "version": self.version}, {**theirs, "version": other.version}
        return [f"{k}: was {was.get(k)!r}, now {now.get(k)!r}" for k in dict.fromkeys([*mine, *theirs])
                if mine.get(k) != theirs.get(k)]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["problems"] = list(self.problems)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunManifest:
        # run.json files written before the version was stored: "unknown", so that a resume refuses
        return cls(**{"version": "unknown", **data, "problems": tuple(data.get("problems", ()))})


class RunStore:
    """Reads and appends the records of one run directory."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.results_path = self.run_dir / RESULTS_FILE
        self.manifest_path = self.run_dir / MANIFEST_FILE
        self._repaired = False

    def records(self) -> list[ProblemRecord]:
        """The latest record of each problem, in the order problems first finished."""
        latest: dict[str, ProblemRecord] = {}
        for record in self._read_all():
            latest.pop(record.key, None)
            latest[record.key] = record
        return list(latest.values())

    def finished_keys(self) -> set[str]:
        return {r.key for r in self.records() if r.finished}

    def append(self, record: ProblemRecord) -> None:
        """Append one record as one line, durably. Only one process may append to a run at a time."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if not self._repaired:
            self._cut_torn_tail()
            self._repaired = True
        line = (json.dumps(record.to_dict(), separators=(",", ":")) + "\n").encode()
        fd = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):  # a full disk: leave no half line behind for the next append
                raise OSError(f"short write to {self.results_path}: {written} of {len(line)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_manifest(self) -> RunManifest | None:
        if not self.manifest_path.exists():
            return None
        return RunManifest.from_dict(json.loads(self.manifest_path.read_text()))

    def open_run(self, manifest: RunManifest) -> RunManifest:
        """Start a run, or resume one begun with the same settings (its problem list grows to the union)."""
        old = self.read_manifest()
        if old is not None and old.identity() != manifest.identity():
            raise RunConfigError(
                f"{self.run_dir} holds a run started with other settings ({'; '.join(old.differences(manifest))}); "
                "its results would mix with these. Rerun with its settings to resume, or start over with "
                "--force-new (the old run is kept beside it) or another --out directory"
            )
        if old is not None:
            extra = tuple(k for k in manifest.problems if k not in set(old.problems))
            manifest = replace(old, problems=old.problems + extra)
        write_atomic(self.manifest_path, json.dumps(manifest.to_dict(), indent=2))
        return manifest

    def _read_all(self) -> Iterable[ProblemRecord]:
        if not self.results_path.exists():
            return
        with open(self.results_path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                if not raw.endswith(b"\n"):
                    log.warning("%s: ignoring a torn last line (the run was killed while writing)", self.results_path)
                    return
                try:
                    yield ProblemRecord.from_dict(json.loads(raw))
                except (ValueError, TypeError, KeyError) as exc:
                    log.warning("%s:%d: unreadable record skipped (%s)", self.results_path, number, exc)

    def _cut_torn_tail(self) -> None:
        if not self.results_path.exists():
            return
        data = self.results_path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            log.warning("%s: cutting a torn last line of %d bytes", self.results_path, len(data) - keep)
            with open(self.results_path, "r+b") as f:
                f.truncate(keep)


@functools.cache
def _umask() -> int:
    mask = os.umask(0)  # the only way to read it; done once
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would differ from every other file we write
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
