"""``tritonsmith optimize``: run the refinement loop on one problem with a live progress view.

Wired into the ``tritonsmith`` typer app as ``app.command("optimize")(optimize_command)``.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from tritonsmith.core.contract import torch_computes_line

if TYPE_CHECKING:
    from tritonsmith.graphs.optimizer import OptimizeResult


def policy_line(policy: str | None, torch_ops: tuple[str, ...]) -> str:
    """``"hybrid: torch computes: logsumexp"`` for a kernel PyTorch helped compute."""
    return f"{policy or 'hybrid'} policy, {torch_computes_line(torch_ops)}"

__all__ = ["optimize_command", "write_outputs"]

log = logging.getLogger(__name__)
console = Console()
err_console = Console(stderr=True)

_STATUS_COLOUR = {"correct": "green", "wrong_output": "red", "compile_error": "red", "runtime_error": "red",
                  "timeout": "yellow", "crashed": "red", "rejected": "magenta", "no_code": "yellow",
                  "model_error": "red"}


def optimize_command(
    problem: Annotated[str, typer.Argument(help="KernelBench-format reference file (or example:NAME).")],
    model: Annotated[str | None, typer.Option(help="Chat model name (default: TRITONSMITH_MODEL or gpt-4.1).")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server, e.g. http://localhost:8000/v1.")] = None,
    iterations: Annotated[int | None, typer.Option(min=1, help="Generated candidates at most (default 3).")] = None,
    start_from: Annotated[str | None, typer.Option("--from", help="Start from this Triton kernel file (fix or speed it up).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder (default ./tritonsmith-out/PROBLEM).")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cuda or cpu (interpreter: correctness only).")] = None,
    generator: Annotated[str | None, typer.Option(help="auto, llm or builtin (auto: llm when configured).")] = None,
    trials: Annotated[int | None, typer.Option(min=1, help="Correctness trials per candidate.")] = None,
    policy: Annotated[str | None, typer.Option(help="hybrid (torch may keep some ops, reported) or strict.")] = None,
    scale: Annotated[bool | None, typer.Option("--scale/--no-scale", help="Shrink the problem's shapes first (reported).")] = None,
    memory: Annotated[bool, typer.Option("--memory/--no-memory", help="Use the kernel memory.")] = True,
    record: Annotated[Path | None, typer.Option(help="Record every model request and reply in "
                                                     "DIR/transcript.json (replayable in tests).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run saved in --out (interrupted, or ended "
                                                         "by the model server, or with iterations left).")] = False,
) -> None:
    """Turn a PyTorch reference into a verified Triton kernel: generate, evaluate, profile, refine."""
    from tritonsmith.agents.llm import LLMConfigurationError, ModelUnavailableError
    from tritonsmith.cli import resolve_path
    from tritonsmith.core.problem import ProblemError, load_problem
    from tritonsmith.graphs._checkpoint import FileCheckpointer, RunFiles
    from tritonsmith.graphs.optimizer import optimize

    if generator not in (None, "auto", "llm", "builtin"):
        raise typer.BadParameter(f"--generator must be auto, llm or builtin, not {generator!r}")
    ref_path = resolve_path(problem)
    kernel = resolve_path(start_from).read_text() if start_from else None
    settings: dict[str, Any] = {k: v for k, v in {"trials": trials, "scale": scale, "policy": policy}.items() if v is not None}
    if not memory:
        settings["use_memory"] = False
    if record is not None:
        settings["record_dir"] = str(record)
    view = _Progress()
    try:
        target = out or Path("tritonsmith-out") / _safe(load_problem(ref_path).name)
        run_files = RunFiles(target)
        thread = run_files.thread() if resume else run_files.new_thread(ref_path.name)
        with console.status(f"optimizing {ref_path.name}...", spinner="dots") as status:
            view.status = status
            result = optimize(ref_path, model=model, base_url=base_url, iterations=iterations, device=device,
                              start_from=kernel, generator=generator, on_event=view.on_event,
                              checkpointer=FileCheckpointer(run_files.checkpoints), thread_id=thread, resume=resume,
                              **settings)  # type: ignore[arg-type]
    except (LLMConfigurationError, ModelUnavailableError, ProblemError, ValueError, FileNotFoundError) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    written = write_outputs(result, target, reference=ref_path)
    colour = "green" if result.ok else "red"
    best = next((a for a in result.attempts if a.iteration == result.best_iteration), None)
    hybrid = f" ({policy_line(result.settings.get('policy'), best.torch_ops)})" if best and best.torch_ops else ""
    console.print(f"[{colour}]{result.status}[/{colour}]{escape(hybrid)}: {escape(result.reason)}")
    for path in written:
        console.print(f"  wrote {path}")
    if result.best_source is not None:
        from tritonsmith.graphs._report import check_command

        console.print(f"  check it: {escape(check_command(str(written[1]), str(written[0])))}", soft_wrap=True)
    raise typer.Exit(0 if result.ok else 1)


class _Progress:
    """Prints one row per evaluated candidate and keeps the spinner's text current."""

    def __init__(self) -> None:
        self.status: Any = None

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "analyzed":
            console.print(f"[bold]{event['problem']}[/bold] on {event['device']} ({event.get('bound') or '?'})")
        elif kind == "generated" and self.status is not None:
            self.status.update(f"iteration {event['iteration']}: evaluating the {event['generator']} candidate...")
        elif kind == "evaluated":
            console.print(_row(event))
        elif kind == "decided" and self.status is not None:
            self.status.update(f"{event['action']}: {event['reason']}")


def _row(e: dict[str, Any]) -> str:
    colour = _STATUS_COLOUR.get(e["status"], "white")
    if e.get("reward_basis") == "unmeasured":
        speed = "speed unmeasured (no GPU)"
    elif e.get("speedup") is not None:
        speed = f"{e['speedup']:.2f}x vs {e['reward_basis']}"
    else:
        speed = "-"
    msg = e.get("message", "")
    msg = escape(msg if len(msg) <= 90 else msg[:87] + "...")
    if e.get("torch_ops"):
        msg = f"[magenta]{escape(torch_computes_line(e['torch_ops']))}[/magenta]  {msg}"  # hybrid: say it
    return (f"  iter {e['iteration']} {escape('[' + e['generator'] + ']')} [{colour}]{e['status']}[/{colour}]  {speed}  "
            f"reward {e['reward']:.3f}  {msg}")


def write_outputs(result: OptimizeResult, out: Path, *, reference: Path) -> list[Path]:
    """Write the best kernel (as verified, next to a copy of its reference and a check script) and the reports.

    The kernel file is the verified source under a comment: ``tritonsmith eval REF KERNEL`` accepts it as is
    (and ``--from`` reads it back); ``check_NAME.py`` runs it against the reference copy.
    """
    from tritonsmith.graphs._report import check_command, check_script, kernel_file

    out.mkdir(parents=True, exist_ok=True)
    name = _safe(result.problem)
    written = []
    check_md = ""
    if result.best_source is not None:
        ref_copy, kernel, check = out / f"{name}_reference.py", out / f"{name}_triton.py", out / f"check_{name}.py"
        ref_copy.write_text(reference.read_text())
        kernel.write_text(kernel_file(result.best_source, reference_file=ref_copy.name, kernel_name=kernel.name,
                                      check_name=check.name))
        check.write_text(check_script(reference_file=ref_copy.name, kernel_name=kernel.name))
        written += [kernel, ref_copy, check]
        check_md = (f"\n## Check it\n\n```bash\n{check_command(str(ref_copy), str(kernel))}\n"
                    f"python {check}\n```\n")
    report_json, report_md = out / "report.json", out / "report.md"
    report_json.write_text(json.dumps(result.to_dict(), indent=2))
    report_md.write_text(result.to_markdown() + check_md)
    return [*written, report_json, report_md]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "problem"
