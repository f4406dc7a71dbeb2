"""Do the verified kernels of a suite run survive new shapes? The evaluator's ``generalize`` check over a run.

    python benchmarks/generalize_check.py RUN_DIR [RUN_DIR ...] KERNELBENCH_DIR [--device cuda] [--scale]
        [--timeout 300] [--out DIR [--resume]] [--jobs N]

For every ``correct`` record of RUN_DIR/results.jsonl, its kernel (RUN_DIR/kernels/KEY.py) is evaluated again
against KERNELBENCH_DIR/level{L}/{problem}.py with ``generalize=True`` (correctness only, no timing): the
inputs' leading dimension halved and at an odd size. Prints a table (problem, generalizes yes/no/n/a, note)
and the share that generalises among the kernels whose reference accepts other leading sizes; writes
generalize.json and generalize.md into --out when given. ``--scale`` must match the run (a CPU run with
--scale wrote kernels for the scaled problems). RUN_DIR may also be a recorded results folder
(``benchmarks/results/...``: results.jsonl and kernels_and_logs.tar.gz): its kernels are unpacked to a
temporary run folder first. Several RUN_DIRs are checked one after the other; a problem verified in more than
one is checked once, from the first run that has it. ``--jobs N`` checks N kernels at a time, each shard in its
own process (its rows in --out/shardK/, merged into --out when all finish): compiling dominates, not the GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from collections.abc import Callable
from typing import Any


def check_run(run_dir: Path, kb: Path, device: str, scale: bool, timeout: float, *,
              rows: list[dict[str, Any]] | None = None, shard: tuple[int, int] = (0, 1), skip: set[str] = frozenset(),
              label: str = "",
              on_row: Callable[[list[dict[str, Any]]], None] = lambda rows: None) -> list[dict[str, Any]]:
    """Check every verified kernel of the run not already in ``rows`` (a resumed check) nor in ``skip``, and
    whose position among the run's verified kernels is ``shard[0]`` modulo ``shard[1]``; ``on_row`` sees the
    rows after each one (a check cut by a time limit keeps what it finished)."""
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.evaluator._evaluate import evaluate

    rows = list(rows or [])
    done = {r["problem"] for r in rows} | set(skip)
    for rec in _verified(run_dir)[shard[0]::shard[1]]:
        if f"level{rec.level}/{rec.problem}" in done:
            continue
        ref = kb / f"level{rec.level}" / f"{rec.problem}.py"
        row: dict[str, Any] = {"problem": f"level{rec.level}/{rec.problem}", "run": label or run_dir.name}
        try:
            result = evaluate(ref, run_dir / rec.candidate_file, device=device, trials=2, benchmark=False,
                              scale=scale, timeout_s=timeout, generalize=True)
        except (ProblemError, OSError) as exc:
            row.update(generalizes="not checked", note=f"{type(exc).__name__}: {exc}"[:300])
        else:
            row.update(generalizes=result.generalizes or f"not checked ({result.status.value})",
                       note=(result.generalize_note or result.message)[:300])
        rows.append(row)
        print(f"{row['problem'][:48]:48s} {row['generalizes']:12s} {row['note'][:140]}", flush=True)
        on_row(rows)
    return rows


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    applicable = [r for r in rows if r["generalizes"] in ("yes", "no")]
    yes = sum(r["generalizes"] == "yes" for r in applicable)
    lines = ["# Unseen-shape check of verified kernels", "",
             f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
             f"- machine: {platform.node()} ({os.cpu_count()} cores)", f"- command: `{command}`",
             f"- verified kernels checked: {len(rows)}; reference accepts other leading sizes: {len(applicable)}; "
             f"generalize: {yes} of {len(applicable)}", "", "| problem | generalizes | kernel from | note |", "|---|---|---|---|"]
    lines += [f"| {r['problem']} | {r['generalizes']} | {r.get('run', '')} | {r['note'].replace('|', '/')} |"
              for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", type=Path, nargs="+", help="RUN_DIR [RUN_DIR ...] KERNELBENCH_DIR")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--out", type=Path, help="write generalize.json and generalize.md here, after every kernel")
    ap.add_argument("--resume", action="store_true", help="keep the rows of --out/generalize.json, check the rest")
    ap.add_argument("--jobs", type=int, default=1, help="shards checked at once, each in its own process")
    ap.add_argument("--only", default="", help="check only these problems: comma-separated level/number prefixes "
                    "such as level1/21,level2/90 (\"level1/2\" would not match 21)")
    ap.add_argument("--shard", default="0/1", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if len(args.paths) < 2:
        ap.error("give at least one RUN_DIR and the KernelBench folder")
    if args.jobs > 1 and not args.out:
        ap.error("--jobs needs --out (each shard writes its rows there)")
    command = "python benchmarks/generalize_check.py " + " ".join(sys.argv[1:])
    if args.jobs > 1:
        rows = run_shards(args.jobs, args.out)
    else:
        rows = check_runs(args.paths[:-1], args.paths[-1], args, tuple(map(int, args.shard.split("/"))))
    if args.out and args.shard == "0/1":
        write(args.out, rows, command)
    print(markdown(rows, command))


def write(out: Path, rows: list[dict[str, Any]], command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "generalize.json").write_text(json.dumps(rows, indent=1))
    (out / "generalize.md").write_text(markdown(rows, command))


def check_runs(runs: list[Path], kb: Path, args: argparse.Namespace, shard: tuple[int, int]) -> list[dict[str, Any]]:
    """Every run's verified kernels in turn, a problem once (from the first run that verified it)."""
    out = args.out / f"shard{shard[0]}" if args.out and shard[1] > 1 else args.out
    rows: list[dict[str, Any]] = json.loads((out / "generalize.json").read_text()) \
        if args.resume and out and (out / "generalize.json").exists() else []
    command = "python benchmarks/generalize_check.py " + " ".join(sys.argv[1:])
    seen: set[str] = set()
    for run in runs:
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = as_run_dir(run, Path(tmp))
            names = {f"level{rec.level}/{rec.problem}" for rec in _verified(run_dir)}
            rows = check_run(run_dir, kb, args.device, args.scale, args.timeout, rows=rows, shard=shard,
                             skip=seen | _not_chosen(names, args.only), label=run.name,
                             on_row=lambda r: out is not None and write(out, r, command))
            seen |= names
    return rows


def _not_chosen(names: set[str], only: str) -> set[str]:
    """The problems of ``names`` that ``--only`` leaves out (none without it)."""
    keys = [k.strip() for k in only.split(",") if k.strip()]
    return {n for n in names if keys and not any(n.startswith(k + "_") for k in keys)}


def _verified(run_dir: Path) -> list[Any]:
    from tritonsmith.suite.results import RunStore
    return [rec for rec in RunStore(run_dir).records() if rec.ok and rec.candidate_file]


def run_shards(jobs: int, out: Path) -> list[dict[str, Any]]:
    """Run this script ``jobs`` times at once, shard k of jobs each; a shard stopped early keeps its rows."""
    argv = _without_option(sys.argv[1:], "--jobs")
    procs = [subprocess.Popen([sys.executable, __file__, *argv, "--shard", f"{k}/{jobs}"]) for k in range(jobs)]
    signal.signal(signal.SIGTERM, _interrupt)  # a time limit's SIGTERM still merges what the shards finished
    try:
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:
        print("stopped: merging the rows the shards finished", flush=True)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
    rows: list[dict[str, Any]] = []
    for k in range(jobs):
        part = out / f"shard{k}" / "generalize.json"
        rows += json.loads(part.read_text()) if part.exists() else []
    return sorted(rows, key=lambda r: r["problem"])


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _without_option(argv: list[str], name: str) -> list[str]:
    """``argv`` less ``name VALUE`` and ``name=VALUE``."""
    kept: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(name + "="):
            kept.append(a)
    return kept


def as_run_dir(path: Path, tmp: Path) -> Path:
    """``path`` itself when it holds ``kernels/``; for a recorded results folder (``results.jsonl`` beside
    ``kernels_and_logs.tar.gz``), a run folder in ``tmp`` with its records and unpacked kernels."""
    packed = path / "kernels_and_logs.tar.gz"
    if (path / "kernels").is_dir() or not packed.exists():
        return path
    run = tmp / "run"
    run.mkdir()
    for name in ("results.jsonl", "run.json"):
        if (path / name).exists():
            shutil.copy(path / name, run / name)
    with tarfile.open(packed) as tar:
        tar.extractall(run, members=[m for m in tar.getmembers() if m.name.startswith("kernels/") and m.isreg()
                                     and ".." not in m.name], filter="data")
    return run


if __name__ == "__main__":
    main()
