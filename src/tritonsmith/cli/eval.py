"""``tritonsmith eval``: the evaluator alone, on one reference and one candidate."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tritonsmith.cli._common import Device, Policy, Tolerance, fail, make_console, resolve_path
from tritonsmith.cli._interrupt import INTERRUPTED_EXIT, interruptible

if TYPE_CHECKING:
    from tritonsmith.core.results import EvalResult

__all__ = ["eval_command", "result_table"]

EPILOG = ("Example: tritonsmith eval example:softmax_reference.py example:softmax_triton.py --device cpu. "
          "Exit code 0: verified; 1: the candidate failed; 2: bad input (the reference itself, a path, an option).")


def eval_command(
    reference: Annotated[str, typer.Argument(help="KernelBench-format reference file (or example:NAME).")],
    candidate: Annotated[str, typer.Argument(help="Triton candidate defining ModelNew (or example:NAME).")],
    device: Annotated[Device, typer.Option(help="cpu: Triton interpreter, correctness only.")] = Device.auto,
    trials: Annotated[int, typer.Option(min=1, help="Correctness trials on fresh random inputs.")] = 5,
    tolerance: Annotated[Tolerance, typer.Option(help="kernelbench: allclose 1e-4 (fp32); numerics: vs float64.")] = Tolerance.kernelbench,
    policy: Annotated[Policy, typer.Option(help="hybrid: torch may keep some ops (reported); strict: all compute in Triton.")] = Policy.hybrid,
    scale: Annotated[bool, typer.Option("--scale/--no-scale", help="Shrink the problem's shapes first (reported).")] = False,
    timeout: Annotated[float | None, typer.Option(help="Wall-clock limit for the worker, seconds.", show_default="300 on CUDA, 600 on the CPU, +3 per Triton kernel beyond 30 (at most 900)")] = None,
    generalize: Annotated[bool, typer.Option(help="Also check it with the inputs' leading dim halved and odd.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check a Triton candidate against its reference and, on a GPU, time it against eager and torch.compile."""
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.evaluator import evaluate

    console = make_console()
    ref_path = resolve_path(reference, what="reference file")
    cand_path = resolve_path(candidate, what="candidate file")
    with interruptible():
        try:
            with console.status(f"evaluating {cand_path.name} on {device.value}...", spinner="dots"):
                result = evaluate(ref_path, cand_path, device=device.value, trials=trials,  # type: ignore[arg-type]
                                  tolerance=tolerance.value, policy=policy.value, scale=scale, timeout_s=timeout,
                                  generalize=generalize)
        except (ProblemError, ValueError) as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/yellow]: the evaluation was stopped; nothing to keep")
            raise typer.Exit(INTERRUPTED_EXIT) from None
    if json_out:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        console.print(result_table(result))
        if not result.ok:
            console.print(escape(result.feedback()))
    raise typer.Exit(0 if result.ok else 1)


def result_table(result: EvalResult) -> Table:
    colour = "green" if result.ok else "red"
    table = Table(title=f"tritonsmith eval: {result.problem}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("status", f"[{colour}]{result.status.value}[/{colour}] — {escape(result.message)}")
    table.add_row("device", result.device_name)
    if result.correctness:
        c = result.correctness
        table.add_row("correctness", f"{c.passed}/{c.trials} trials ({c.tolerance}); max abs err {c.max_abs_error:.2e}")
    b = result.benchmark
    if b:
        table.add_row("candidate", f"{b.candidate.median_ms:.4f} ms (spread {b.candidate.spread:.1%}, {b.candidate.reps} reps)")
        table.add_row("eager", f"{b.eager.median_ms:.4f} ms -> speedup {b.speedup_vs_eager:.2f}x{_ci(b.speedup_ci_vs_eager)}")
        if b.compiled:
            table.add_row("torch.compile", f"{b.compiled.median_ms:.4f} ms -> speedup {b.speedup_vs_compile:.2f}x"
                                           f"{_ci(b.speedup_ci_vs_compile)}")
        elif b.compiled_note:
            table.add_row("torch.compile", b.compiled_note)
        for note in b.notes:
            table.add_row("note", note)
    elif result.timing_note:
        table.add_row("timing", result.timing_note)
    if result.checks and result.checks.triton_share is not None:
        table.add_row("Triton share", f"{result.checks.triton_share:.0%} of the candidate's GPU time in its own kernels")
    if result.generalizes:
        table.add_row("generalizes", f"{result.generalizes} ({result.generalize_note})")
    if result.scaling_note:
        table.add_row("[yellow]scaled[/yellow]", result.scaling_note)
    table.add_row("wall time", f"{result.wall_s:.1f} s")
    return table


def _ci(interval: tuple[float, float] | None) -> str:
    return f" (95% CI {interval[0]:.2f}-{interval[1]:.2f})" if interval else ""
