"""``tritonsmith profile``: speed of light, per-kernel times, counters and compile facts of a problem or kernel."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from tritonsmith.cli._common import Device, fail, make_console, resolve_path
from tritonsmith.cli._interrupt import INTERRUPTED_EXIT, interruptible

if TYPE_CHECKING:
    from rich.console import Console

    from tritonsmith.profiler import ProfileReport

__all__ = ["profile_command"]

EPILOG = ("Example: tritonsmith profile example:softmax_reference.py example:softmax_triton.py --device cpu "
          "(on the CPU: FLOPs, bytes, the bound and compile facts; times need a GPU).")


def profile_command(
    problem: Annotated[str, typer.Argument(help="KernelBench-format problem file (Model, get_inputs, get_init_inputs), "
                                               "or example:NAME")],
    candidate: Annotated[str | None, typer.Argument(help="Triton candidate file defining ModelNew, or example:NAME")] = None,
    device: Annotated[Device, typer.Option(help="cpu: counts, bound and ahead-of-time compile facts")] = Device.auto,
    json_out: Annotated[bool, typer.Option("--json", help="print the full report as JSON")] = False,
    ncu: Annotated[bool, typer.Option(help="collect Nsight Compute counters when ncu is available")] = True,
    compiled: Annotated[bool, typer.Option(help="also profile torch.compile of the reference")] = False,
    target_gpu: Annotated[str | None, typer.Option(help="GPU whose ceilings a CPU profile uses")] = None,
) -> None:
    """Where the time goes and how far from the speed of light: FLOPs, bytes, bound, kernel times, counters.

    Also the Triton compile facts and the next thing to try."""
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.profiler import profile_kernel

    console = make_console()
    problem_path = resolve_path(problem, what="problem file")
    candidate_path = resolve_path(candidate, what="candidate file") if candidate else None
    with interruptible():
        try:
            report = profile_kernel(problem_path, candidate_path, device=device.value, ncu=ncu,
                                    compiled=compiled, target_gpu=target_gpu)
        except (ProblemError, ValueError, FileNotFoundError) as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/yellow]: the profile was stopped; nothing to keep")
            raise typer.Exit(INTERRUPTED_EXIT) from None
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=1))
        return
    _print_report(console, report)


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
