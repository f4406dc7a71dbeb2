"""CLI commands ``tritonsmith profile`` and ``tritonsmith search-web`` (registered by ``tritonsmith.cli``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from tritonsmith.profiler import ProfileReport

__all__ = ["profile_command", "web_search_command"]


def profile_command(
    problem: Annotated[str, typer.Argument(help="KernelBench-format problem file (Model, get_inputs, get_init_inputs), "
                                               "or example:NAME")],
    candidate: Annotated[str | None, typer.Argument(help="Triton candidate file defining ModelNew, or example:NAME")] = None,
    device: Annotated[str, typer.Option(help="auto, cuda or cpu (cpu: counts, bound and ahead-of-time compile facts)")] = "auto",
    json_out: Annotated[bool, typer.Option("--json", help="print the full report as JSON")] = False,
    ncu: Annotated[bool, typer.Option(help="collect Nsight Compute counters when ncu is available")] = True,
    compiled: Annotated[bool, typer.Option(help="also profile torch.compile of the reference")] = False,
    target_gpu: Annotated[str | None, typer.Option(help="GPU whose ceilings a CPU profile uses")] = None,
) -> None:
    """Where the time goes and how far from the speed of light: the problem's FLOPs and bytes, the bound,
    per-kernel times, Triton compile facts, hardware counters, and the next thing to try."""
    from rich.console import Console

    from tritonsmith.cli import resolve_path
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.profiler import profile_kernel

    console = Console()
    problem_path = resolve_path(problem)
    candidate_path = resolve_path(candidate) if candidate else None
    try:
        report = profile_kernel(problem_path, candidate_path, device=device, ncu=ncu,
                                compiled=compiled, target_gpu=target_gpu)
    except (ProblemError, ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=1))
        return
    _print_report(console, report)


def web_search_command(
    query: Annotated[str, typer.Argument(help="what to search for")],
    max_results: Annotated[int, typer.Option(help="number of results")] = 5,
    domain: Annotated[list[str] | None, typer.Option(help="keep only results from this domain (repeatable)")] = None,
    trusted: Annotated[bool, typer.Option(help="keep only Triton/PyTorch docs, GitHub and paper sites")] = False,
    timeout_s: Annotated[float, typer.Option(help="overall time limit in seconds")] = 8.0,
    json_out: Annotated[bool, typer.Option("--json", help="print the response as JSON")] = False,
) -> None:
    """Search the web (cached, time-limited; prints why when unavailable)."""
    from tritonsmith.tools.web_search import TRUSTED_DOMAINS, web_search

    domains = list(domain or []) + (list(TRUSTED_DOMAINS) if trusted else [])
    response = web_search(query, max_results=max_results, domains=domains or None, timeout_s=timeout_s)
    if json_out:
        typer.echo(json.dumps(response.to_dict(), indent=1))
    else:
        typer.echo(response.to_text())
    if not response.ok:
        raise typer.Exit(1)


def _print_report(console: Console, report: ProfileReport) -> None:
    from rich.table import Table

    console.print(f"[bold]{report.problem}[/bold] on {report.device_name} ({report.status.value}, {report.wall_s:.1f} s)")
    if report.work:
        w = report.work
        flops = f"{w.flops:,}" if w.flops is not None else "unknown"
        console.print(f"FLOPs {flops}; minimum bytes {w.min_bytes:,} (inputs {w.input_bytes:,}, outputs "
                      f"{w.output_bytes:,}, parameters {w.parameter_bytes:,}); dtype {w.dtype}")
    if report.impls:
        table = Table("implementation", "median", "% of speed of light", "TB/s", "TFLOP/s", "kernels")
        for impl in report.impls:
            pct = f"{impl.percent_of_sol:.0f}%" if impl.percent_of_sol is not None else "-"
            tf = f"{impl.achieved_tflops:.1f}" if impl.achieved_tflops is not None else "-"
            launches = str(impl.breakdown.launches) if impl.breakdown else "-"
            table.add_row(impl.label, f"{impl.timing.median_ms:.4f} ms", pct, f"{impl.achieved_gbs / 1e3:.2f}", tf, launches)
        console.print(table)
    console.print(report.feedback(limit=6000), markup=False, highlight=False)
    for note in report.notes:
        console.print(f"[dim]note: {note}[/dim]")
