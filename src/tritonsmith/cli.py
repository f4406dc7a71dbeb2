"""The ``tritonsmith`` command line."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tritonsmith.problem import ProblemError

app = typer.Typer(
    name="tritonsmith",
    help="Turn PyTorch reference code into fast, verified Triton kernels.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

EXAMPLE_PREFIX = "example:"


@app.callback()
def _root(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")] = False) -> None:
    """tritonsmith: PyTorch reference in, verified Triton kernels out."""
    if verbose:
        logging.getLogger("tritonsmith").setLevel(logging.INFO)


def resolve_path(value: str) -> Path:
    """A file path, or ``example:NAME`` for a file bundled with tritonsmith."""
    if value.startswith(EXAMPLE_PREFIX):
        from tritonsmith.examples import example_path

        try:
            return example_path(value.removeprefix(EXAMPLE_PREFIX))
        except FileNotFoundError as exc:
            raise typer.BadParameter(str(exc)) from None
    path = Path(value)
    if not path.is_file():
        raise typer.BadParameter(f"file not found: {value}")
    return path


@app.command("eval")
def eval_command(
    reference: Annotated[str, typer.Argument(help="KernelBench-format reference file (or example:NAME).")],
    candidate: Annotated[str, typer.Argument(help="Triton candidate defining ModelNew (or example:NAME).")],
    device: Annotated[str, typer.Option(help="cuda, cpu (Triton interpreter, correctness only) or auto.")] = "auto",
    trials: Annotated[int, typer.Option(min=1, help="Correctness trials on fresh random inputs.")] = 5,
    tolerance: Annotated[str, typer.Option(help="kernelbench or numerics.")] = "kernelbench",
    policy: Annotated[str, typer.Option(help="hybrid: torch may keep some ops (reported); strict: all compute in Triton.")] = "hybrid",
    scale: Annotated[bool, typer.Option(help="Scale the problem's shapes down first (reported).")] = False,
    timeout: Annotated[float | None, typer.Option(help="Wall-clock limit for the worker, seconds.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    generalize: Annotated[bool, typer.Option(help="Also check it with the inputs' leading dim halved and odd.")] = False,
) -> None:
    """Check a Triton candidate against its reference and, on a GPU, time it against eager and torch.compile."""
    from tritonsmith.tools.evaluate import evaluate

    ref_path, cand_path = resolve_path(reference), resolve_path(candidate)
    try:
        with console.status(f"evaluating {cand_path.name} on {device}...", spinner="dots"):
            result = evaluate(ref_path, cand_path, device=device, trials=trials, tolerance=tolerance,  # type: ignore[arg-type]
                              policy=policy, scale=scale, timeout_s=timeout, generalize=generalize)
    except (ProblemError, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if json_out:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        console.print(result_table(result))
        if not result.ok:
            console.print(result.feedback())
    raise typer.Exit(0 if result.ok else 1)


def result_table(result) -> Table:  # noqa: ANN001 - EvalResult, imported lazily
    colour = "green" if result.ok else "red"
    table = Table(title=f"tritonsmith eval: {result.problem}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("status", f"[{colour}]{result.status.value}[/{colour}] — {result.message}")
    table.add_row("device", result.device_name)
    if result.correctness:
        c = result.correctness
        table.add_row("correctness", f"{c.passed}/{c.trials} trials ({c.tolerance}); max abs err {c.max_abs_error:.2e}")
    b = result.benchmark
    if b:
        table.add_row("candidate", f"{b.candidate.median_ms:.4f} ms (spread {b.candidate.spread:.1%}, {b.candidate.reps} reps)")
        table.add_row("eager", f"{b.eager.median_ms:.4f} ms -> speedup {b.speedup_vs_eager:.2f}x")
        if b.compiled:
            table.add_row("torch.compile", f"{b.compiled.median_ms:.4f} ms -> speedup {b.speedup_vs_compile:.2f}x")
        elif b.compiled_note:
            table.add_row("torch.compile", b.compiled_note)
        for note in b.notes:
            table.add_row("note", note)
    elif result.timing_note:
        table.add_row("timing", result.timing_note)
    if result.scaling_note:
        table.add_row("[yellow]scaled[/yellow]", result.scaling_note)
    if result.generalizes:
        table.add_row("generalizes", f"{result.generalizes} ({result.generalize_note})")
    table.add_row("wall time", f"{result.wall_s:.1f} s")
    return table


def _register_commands() -> None:
    """Commands that live next to the code they drive."""
    from tritonsmith.tools.cli_profile import profile_command, web_search_command

    app.command("profile")(profile_command)
    app.command("search-web")(web_search_command)
    from tritonsmith.suite.cli import bench_command, report_command

    app.command("bench")(bench_command)
    app.command("report")(report_command)
    from tritonsmith.graphs.cli import optimize_command

    app.command("optimize")(optimize_command)
    from tritonsmith.memory.cli import memory_app

    app.add_typer(memory_app, name="memory")


_register_commands()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()


if __name__ == "__main__":
    main()
