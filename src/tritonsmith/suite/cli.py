"""``tritonsmith bench`` and ``tritonsmith report`` (typer commands; the main app registers them).

Also runnable alone: ``python -m tritonsmith.suite.cli bench ...`` / ``... report ...``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tritonsmith.core.problem import ProblemError
from tritonsmith.suite.results import ERROR, ProblemRecord, RunConfigError

__all__ = ["app", "bench_command", "report_command"]

console = Console()
err_console = Console(stderr=True)
log = logging.getLogger(__name__)


class RichProgress:
    """done / failed / running counts, a bar and an ETA for the whole suite."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(TextColumn("[bold]suite"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=console, transient=False)
        self.done = self.failed = 0
        self.running: set[str] = set()
        self.task_id = None

    def begin(self, total: int, skipped: int) -> None:
        if skipped:
            console.print(f"resuming: {skipped} problems already finished, {total} to run")
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
        speed = f" {record.speedup_vs_eager:.2f}x vs eager" if record.speedup_vs_eager is not None else ""
        self.progress.console.print(f"[{colour}]{record.status:>15}[/{colour}] {record.key}{speed} "
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
    generator: Annotated[str, typer.Option(help="Generator for the optimize loop (builtin, llm, ...).")] = "builtin",
    iterations: Annotated[int, typer.Option(min=1, help="Optimize iterations per problem.")] = 3,
    device: Annotated[str, typer.Option(help="cuda, cpu (Triton interpreter, correctness only) or auto.")] = "auto",
    out: Annotated[Path | None, typer.Option(help="Run directory (rerun the same command to resume).")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="GPUs to use (default all visible) or CPU workers.")] = None,
    eval_only: Annotated[tuple[str, str] | None, typer.Option(
        "--eval-only", help="Score existing kernels: REFS CANDIDATES directories (no generator).")] = None,
    slots_per_gpu: Annotated[int, typer.Option(min=1, help="Workers per GPU; >1 overlaps generation with "
                                                          "another worker's evaluation (evaluations stay exclusive).")] = 1,
    time_budget: Annotated[float | None, typer.Option(help="Stop starting new problems after this many seconds.")] = None,
    trials: Annotated[int, typer.Option(min=1, help="Correctness trials per evaluation (eval-only).")] = 5,
    tolerance: Annotated[str, typer.Option(help="kernelbench or numerics (eval-only).")] = "kernelbench",
    scale: Annotated[bool, typer.Option(help="Scale problem shapes down first (for the CPU interpreter).")] = False,
    timeout: Annotated[float | None, typer.Option(help="Per-evaluation wall-clock limit, seconds (eval-only).")] = None,
    memory: Annotated[bool, typer.Option(help="Let the loop use its kernel memory (order-dependent).")] = False,
    optimize_fn: Annotated[str | None, typer.Option(hidden=True, help="module:function replacing the optimize loop.")] = None,
) -> None:
    """Run the optimize loop on every problem found (or, with --eval-only, score given kernels); resumable."""
    from tritonsmith.suite.report import write_report
    from tritonsmith.suite.runner import discover_problems, match_candidates, run_suite

    try:
        if eval_only and any(eval_only):
            problems = match_candidates(discover_problems([eval_only[0]]), eval_only[1])
            mode, source = "eval", eval_only[0]
        elif paths:
            problems, mode, source = discover_problems(paths), "optimize", paths[0]
        else:
            raise typer.BadParameter("give problem files/directories, or --eval-only REFS CANDIDATES")
        if not problems:
            raise typer.BadParameter(f"no KernelBench-format problems found in {source}")
        run_dir = out or Path("runs") / _slug(f"{Path(source).resolve().name}-{generator if mode == 'optimize' else 'eval'}")
        console.print(f"{len(problems)} problems -> {run_dir}")
        run = run_suite(problems, run_dir, mode=mode, generator=generator, iterations=iterations, device=device,
                        workers=workers, slots_per_gpu=slots_per_gpu, optimize_fn=optimize_fn, trials=trials,
                        tolerance=tolerance, scale=scale, timeout_s=timeout, time_budget_s=time_budget, use_memory=memory,
                        progress=RichProgress(console))
    except (ProblemError, RunConfigError, ValueError, FileNotFoundError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow]: finished problems are saved; rerun the command to resume")
        raise typer.Exit(130) from None
    report = write_report(run.run_dir)
    _print_summary(report, run.run_dir)
    if run.not_started:
        console.print(f"[yellow]{len(run.not_started)} problems not started (time budget); rerun to continue[/yellow]")


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by tritonsmith bench.")],
    compare: Annotated[Path | None, typer.Option(help="Another run directory to compare against.")] = None,
) -> None:
    """Rebuild a run's report (Markdown, JSON, plots); with --compare, set two runs side by side."""
    from tritonsmith.suite.report import write_comparison, write_report

    for d in (run_dir, compare):
        if d is not None and not (d / "results.jsonl").exists():
            err_console.print(f"[red]error:[/red] {d} is not a run directory (no results.jsonl)")
            raise typer.Exit(2)
    report = write_report(run_dir)
    _print_summary(report, run_dir)
    if compare is not None:
        md, data = write_comparison(run_dir, compare)
        console.print(f"same verdict on {data['same_verdict']} of {data['problems_in_both']} problems; speedups agree "
                      f"within noise on {data['speedups_agree']} of {data['timed_in_both']}; see {md}")


def _print_summary(report, run_dir: Path) -> None:  # noqa: ANN001 - SuiteReport, imported lazily
    from rich.table import Table

    s = report.summary
    table = Table(title=f"suite: {run_dir}")
    for head in ("scope", "problems", "correct", "fast_1 eager", "fast_1 compile", "geomean eager", "geomean compile"):
        table.add_column(head)
    scopes = [("all", s), *report.levels.items()] if len(report.levels) > 1 else [("all", s)]
    for name, m in scopes:
        table.add_row(name, str(m.problems), f"{m.correct} ({m.correctness_rate:.0%})", _pct(m.fast_p["eager"]["1"]),
                      _pct(m.fast_p["compile"]["1"]), _x(m.geomean["eager"]), _x(m.geomean["compile"]))
    console.print(table)
    if s.timed == 0:
        console.print("no GPU timings in this run: correctness only")
    console.print(f"report: {Path(run_dir) / 'report.md'}")


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0%}"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


app = typer.Typer(name="tritonsmith-suite", no_args_is_help=True, pretty_exceptions_enable=False)
app.command("bench")(bench_command)
app.command("report")(report_command)

if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()
