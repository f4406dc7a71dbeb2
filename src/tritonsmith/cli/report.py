"""``tritonsmith report``: rebuild a suite run's report, or set two runs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tritonsmith.cli._common import fail, make_console

if TYPE_CHECKING:
    from tritonsmith.suite.report import SuiteReport

__all__ = ["print_summary", "report_command"]

EPILOG = ("Example: tritonsmith report runs/level1-builtin --compare runs/level1-llm. Writes report.md, "
          "report.json and plots (GPU timings only) into the run directory.")


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by tritonsmith bench.")],
    compare: Annotated[Path | None, typer.Option(help="Another run directory to compare against.")] = None,
) -> None:
    """Rebuild a run's report (Markdown, JSON, plots); with --compare, set two runs side by side."""
    from tritonsmith.suite.report import write_comparison, write_report

    console = make_console()
    for d in (run_dir, compare):
        if d is not None and not (d / "results.jsonl").exists():
            fail(f"{d} is not a run directory (no results.jsonl)", hint="A run directory is what tritonsmith bench "
                 "--out wrote (default: runs/NAME).")
    report = write_report(run_dir)
    print_summary(console, report, run_dir)
    if compare is not None:
        md, data = write_comparison(run_dir, compare)
        console.print(f"same verdict on {data['same_verdict']} of {data['problems_in_both']} problems; speedups agree "
                      f"within noise on {data['speedups_agree']} of {data['timed_in_both']}; see {md}")


def print_summary(console: Console, report: SuiteReport, run_dir: Path) -> None:
    """The run's metrics as a table (one row per level when there are several), and where its report lies."""
    from rich.table import Table

    s = report.summary
    table = Table(title=f"suite: {escape(str(run_dir))}")
    for head in ("scope", "problems", "correct", "fast_1 eager", "fast_1 compile", "geomean eager", "geomean compile"):
        table.add_column(head)
    scopes = [("all", s), *report.levels.items()] if len(report.levels) > 1 else [("all", s)]
    for name, m in scopes:
        table.add_row(name, str(m.problems), f"{m.correct} ({m.correctness_rate:.0%})", _pct(m.fast_p["eager"]["1"]),
                      _pct(m.fast_p["compile"]["1"]), _x(m.geomean["eager"]), _x(m.geomean["compile"]))
    console.print(table)
    if s.timed == 0:
        console.print("speed unmeasured (CPU): no GPU timings in this run, correctness only")
    console.print(f"report: {escape(str(Path(run_dir) / 'report.md'))}")


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0%}"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"
