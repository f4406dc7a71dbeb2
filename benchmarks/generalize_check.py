"""Do the verified kernels of a suite run survive new shapes? The evaluator's ``generalize`` check over a run.

    python benchmarks/generalize_check.py RUN_DIR KERNELBENCH_DIR [--device cuda] [--scale] [--timeout 300]
        [--out DIR [--resume]]

For every ``correct`` record of RUN_DIR/results.jsonl, its kernel (RUN_DIR/kernels/KEY.py) is evaluated again
against KERNELBENCH_DIR/level{L}/{problem}.py with ``generalize=True`` (correctness only, no timing): the
inputs' leading dimension halved and at an odd size. Prints a table (problem, generalizes yes/no/n/a, note)
and the share that generalises among the kernels whose reference accepts other leading sizes; writes
generalize.json and generalize.md into --out when given. ``--scale`` must match the run (a CPU run with
--scale wrote kernels for the scaled problems). RUN_DIR may also be a recorded results folder
(``benchmarks/results/...``: results.jsonl and kernels_and_logs.tar.gz): its kernels are unpacked to a
temporary run folder first.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from collections.abc import Callable
from typing import Any


def check_run(run_dir: Path, kb: Path, device: str, scale: bool, timeout: float, *,
              rows: list[dict[str, Any]] | None = None,
              on_row: Callable[[list[dict[str, Any]]], None] = lambda rows: None) -> list[dict[str, Any]]:
    """Check every verified kernel of the run not already in ``rows`` (a resumed check); ``on_row`` sees the
    rows after each one (a check cut by a time limit keeps what it finished)."""
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.suite.results import RunStore
    from tritonsmith.evaluator._evaluate import evaluate

    rows = list(rows or [])
    done = {r["problem"] for r in rows}
    for rec in RunStore(run_dir).records():
        if not rec.ok or not rec.candidate_file or f"level{rec.level}/{rec.problem}" in done:
            continue
        ref = kb / f"level{rec.level}" / f"{rec.problem}.py"
        row: dict[str, Any] = {"problem": f"level{rec.level}/{rec.problem}"}
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
             f"generalize: {yes} of {len(applicable)}", "", "| problem | generalizes | note |", "|---|---|---|"]
    lines += [f"| {r['problem']} | {r['generalizes']} | {r['note'].replace('|', '/')} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--out", type=Path, help="write generalize.json and generalize.md here, after every kernel")
    ap.add_argument("--resume", action="store_true", help="keep the rows of --out/generalize.json, check the rest")
    args = ap.parse_args()
    command = "python benchmarks/generalize_check.py " + " ".join(sys.argv[1:])
    previous = json.loads((args.out / "generalize.json").read_text()) \
        if args.resume and args.out and (args.out / "generalize.json").exists() else []

    def save(rows: list[dict[str, Any]]) -> None:
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "generalize.json").write_text(json.dumps(rows, indent=1))
            (args.out / "generalize.md").write_text(markdown(rows, command))

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = as_run_dir(args.run_dir, Path(tmp))
        rows = check_run(run_dir, args.kernelbench, args.device, args.scale, args.timeout, rows=previous,
                         on_row=save)
    save(rows)
    print(markdown(rows, command))


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
