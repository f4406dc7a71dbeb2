"""``tritonsmith bench``: the optimize loop (or the evaluator alone) over a suite of problems, resumable."""

from __future__ import annotations

import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tritonsmith.cli._common import Device, GeneratorName, Policy, Tolerance, fail, make_console
from tritonsmith.cli._interrupt import INTERRUPTED_EXIT, interruptible
from tritonsmith.cli.report import print_summary
from tritonsmith.suite.results import ERROR, ProblemRecord

__all__ = ["bench_command"]

EPILOG = ("Example: tritonsmith bench ../kernelbench/level1 --device cpu --scale --out runs/level1. "
          "Results: one line per finished problem in OUT/results.jsonl, kernels in OUT/kernels/, settings in "
          "OUT/run.json, report.md/report.json at the end. Rerun the same command to resume (finished problems "
          "are skipped); a rerun with other settings is refused: --force-new starts over (the old run is kept "
          "beside it) or give another --out. Ctrl-C stops at once; finished problems are kept.")


class RichProgress:
    """done / failed / running counts, a bar and an ETA for the whole suite (drawn on a terminal only)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(TextColumn("[bold]suite"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=console, transient=False,
                                 disable=not console.is_terminal)
        self.done = self.failed = 0
        self.running: set[str] = set()
        self.task_id = None

    def begin(self, total: int, skipped: int) -> None:
        if skipped:
            self.console.print(f"resuming: {skipped} problems already finished, {total} to run")
        self.progress.start()
        self.task_id = self.progress.add_task("suite", total=total, counts=self._counts())

    def started(self, key: str, worker: str) -> None:
        self.running.add(key)
        self._refresh()

    def finished(self, record: ProblemRecord) -> None:
        self.running.discard(record.key)
        self.done += 1
        if not record.ok:
            self.failed += 1
        colour = "green" if record.ok else ("magenta" if record.status == ERROR else "red")
        if record.speedup_vs_eager is not None:
            speed = f" {record.speedup_vs_eager:.2f}x vs eager"
        else:
            speed = " speed unmeasured (CPU)" if record.ok and record.device == "cpu" else ""
        self.progress.console.print(f"[{colour}]{record.status:>15}[/{colour}] {escape(record.key)}{speed} "
                                    f"[dim]({record.wall_s:.1f} s, {record.worker})[/dim]")
        self._refresh(advance=1)

    def end(self) -> None:
        self.progress.stop()

    def _counts(self) -> str:
        return (f"[green]done {self.done - self.failed}[/green] [red]failed {self.failed}[/red] "
                f"[yellow]running {len(self.running)}[/yellow]")

    def _refresh(self, advance: int = 0) -> None:
        if self.task_id is not None:
            self.progress.update(self.task_id, advance=advance, counts=self._counts())


def bench_command(
    paths: Annotated[list[str] | None, typer.Argument(help="Problem files or directories (KernelBench format).")] = None,
    generator: Annotated[GeneratorName, typer.Option(
        help="builtin by default (optimize: auto): a suite with an LLM costs model calls on every problem, so "
             "bench uses one only when asked (auto or llm).")] = GeneratorName.builtin,
    iterations: Annotated[int, typer.Option(min=1, help="Optimize iterations per problem.")] = 3,
    device: Annotated[Device, typer.Option(help="cpu: Triton interpreter, correctness only.")] = Device.auto,
    out: Annotated[Path | None, typer.Option(help="Run directory; rerun the same command to resume.", show_default="runs/DIR-GENERATOR")] = None,
    force_new: Annotated[bool, typer.Option("--force-new", help="Start over in --out even if it holds a run "
                                            "(the old one is moved beside it, never deleted).")] = False,
    workers: Annotated[int | None, typer.Option(min=1, help="GPUs to use or CPU workers.", show_default="all GPUs, or one per core")] = None,
    eval_only: Annotated[tuple[str, str] | None, typer.Option(
        "--eval-only", help="Score existing kernels: REFS CANDIDATES directories (no generator).")] = None,
    slots_per_gpu: Annotated[int, typer.Option(min=1, help="Workers per GPU; >1 overlaps generation with "
                                                          "another worker's evaluation (evaluations stay exclusive).")] = 1,
    time_budget: Annotated[float | None, typer.Option(help="Stop starting new problems after this many seconds.")] = None,
    trials: Annotated[int, typer.Option(min=1, help="Correctness trials per evaluation.")] = 5,
    tolerance: Annotated[Tolerance, typer.Option(help="kernelbench: allclose 1e-4 (fp32); numerics: vs float64.")] = Tolerance.kernelbench,
    policy: Annotated[Policy, typer.Option(help="hybrid: torch may keep some ops (reported); strict: all compute "
                                                "in Triton.")] = Policy.hybrid,
    scale: Annotated[bool, typer.Option("--scale/--no-scale", help="Shrink problem shapes first (for the CPU "
                                        "interpreter; reported).")] = False,
    timeout: Annotated[float | None, typer.Option(help="Per-evaluation wall-clock limit, seconds.", show_default="300 on CUDA, 600 on the CPU, +3 per Triton kernel beyond 30 (at most 900)")] = None,
    memory: Annotated[bool, typer.Option("--memory/--no-memory", help="Let the loop use the kernel memory. Off by "
                                         "default (optimize: on): workers run in parallel and a suite score must "
                                         "not depend on the order problems finished in.")] = False,
    optimize_fn: Annotated[str | None, typer.Option(hidden=True, help="module:function replacing the optimize loop.")] = None,
) -> None:
    """Run the optimize loop on every problem found (or, with --eval-only, score given kernels); resumable."""
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.suite.report import write_report
    from tritonsmith.suite.results import RunConfigError
    from tritonsmith.suite import SuiteSettings, discover_problems, match_candidates, run_suite

    console = make_console()
    try:
        if eval_only and any(eval_only):
            problems = match_candidates(discover_problems([eval_only[0]]), eval_only[1])
            mode, source = "eval", eval_only[0]
        elif paths:
            problems, mode, source = discover_problems(paths), "optimize", paths[0]
        else:
            raise typer.BadParameter("give problem files/directories, or --eval-only REFS CANDIDATES")
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    if not problems:
        fail(f"no KernelBench-format problems found in {source}", hint="A problem file defines class Model, "
             "get_inputs() and get_init_inputs().")
    run_dir = out or Path("runs") / _slug(f"{Path(source).resolve().name}-"
                                          f"{generator.value if mode == 'optimize' else 'eval'}")
    if force_new:
        _move_aside(console, run_dir)
    console.print(f"{len(problems)} problems -> {escape(str(run_dir))} (device {device.value}, generator "
                  f"{generator.value if mode == 'optimize' else 'none: eval-only'}, memory "
                  f"{'on' if memory else 'off'})")
    with interruptible():
        try:
            settings = SuiteSettings(mode=mode, generator=generator.value, iterations=iterations,
                                     device=device.value, workers=workers, slots_per_gpu=slots_per_gpu,
                                     optimize_fn=optimize_fn, trials=trials, tolerance=tolerance.value,
                                     policy=policy.value, scale=scale, eval_timeout_s=timeout,
                                     time_budget_s=time_budget, use_memory=memory)
            run = run_suite(problems, run_dir, settings, progress=RichProgress(console))
        except (ProblemError, RunConfigError, ValueError, FileNotFoundError) as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            _interrupted(console, run_dir)
        report = write_report(run.run_dir)
    print_summary(console, report, run.run_dir)
    if run.not_started:
        console.print(f"[yellow]{len(run.not_started)} problems not started (time budget); rerun to continue[/yellow]")


def _interrupted(console: Console, run_dir: Path) -> NoReturn:
    """Ctrl-C: the finished problems are already in results.jsonl; write their report and say so."""
    from tritonsmith.suite.report import write_report
    from tritonsmith.suite.results import RunStore

    store = RunStore(run_dir)
    n = len(store.finished_keys())
    if store.results_path.exists():
        write_report(run_dir)
    console.print(f"[yellow]interrupted[/yellow]: kept {n} finished problem{'s' if n != 1 else ''} in "
                  f"{escape(str(run_dir))} (results.jsonl, report.md); rerun the same command to resume")
    raise typer.Exit(INTERRUPTED_EXIT)


def _move_aside(console: Console, run_dir: Path) -> None:
    if not run_dir.exists():
        return
    aside = run_dir.with_name(f"{run_dir.name}.replaced-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    shutil.move(str(run_dir), str(aside))
    console.print(f"--force-new: the previous run in {escape(str(run_dir))} was moved to {escape(str(aside))}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"
