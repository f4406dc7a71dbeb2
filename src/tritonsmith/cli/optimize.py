"""``tritonsmith optimize``: run the refinement loop on one problem with a live progress view."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from tritonsmith.cli._common import Device, GeneratorName, Policy, Tolerance, fail, make_console, resolve_path, safe_name
from tritonsmith.cli._interrupt import INTERRUPTED_EXIT, interruptible
from tritonsmith.cli._precheck import precheck

if TYPE_CHECKING:
    from tritonsmith.core.settings import Settings
    from tritonsmith.graphs.optimizer import OptimizeResult

__all__ = ["optimize_command", "write_outputs"]

_STATUS_COLOUR = {"correct": "green", "wrong_output": "red", "compile_error": "red", "runtime_error": "red",
                  "timeout": "yellow", "crashed": "red", "rejected": "magenta", "no_code": "yellow",
                  "model_error": "red", "error": "red"}

EPILOG = ("Example: tritonsmith optimize example:softmax_reference.py --device cpu --out tritonsmith-out/softmax. "
          "Results in --out: the kernel as verified (NAME_triton.py), a copy of its reference, check_NAME.py "
          "(python check_NAME.py runs one against the other), report.md and report.json. "
          "Ctrl-C stops at once and keeps the finished attempts. Settings without a value on the command "
          "line come from TRITONSMITH_* environment variables, else the defaults shown.")


def optimize_command(
    problem: Annotated[str, typer.Argument(help="KernelBench-format reference file (or example:NAME).")],
    model: Annotated[str | None, typer.Option(help="Chat model name.", show_default="$TRITONSMITH_MODEL or gpt-4.1")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server, e.g. http://localhost:8000/v1.")] = None,
    iterations: Annotated[int | None, typer.Option(min=1, help="Generated candidates at most.", show_default="3")] = None,
    start_from: Annotated[str | None, typer.Option("--from", help="Start from this Triton kernel file (fix or speed it up).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder.", show_default="tritonsmith-out/PROBLEM")] = None,
    device: Annotated[Device | None, typer.Option(help="cpu: Triton interpreter, correctness only.", show_default="auto")] = None,
    generator: Annotated[GeneratorName | None, typer.Option(
        help="auto: the LLM when a key or --base-url is configured, else builtin (no model).", show_default="auto")] = None,
    trials: Annotated[int | None, typer.Option(min=1, help="Correctness trials per candidate.", show_default="5")] = None,
    tolerance: Annotated[Tolerance | None, typer.Option(help="kernelbench: allclose 1e-4 (fp32); numerics: vs "
                                                        "float64.", show_default="kernelbench")] = None,
    policy: Annotated[Policy | None, typer.Option(
        help="hybrid: torch may keep some ops (reported); strict: all compute in Triton.", show_default="hybrid")] = None,
    scale: Annotated[bool | None, typer.Option("--scale/--no-scale", help="Shrink the problem's shapes first "
                                               "(reported; for the CPU interpreter).", show_default="no-scale")] = None,
    memory: Annotated[bool, typer.Option("--memory/--no-memory", help="Read and store verified kernels in the "
                                         "kernel memory ($TRITONSMITH_MEMORY_DIR, else ~/.local/share/tritonsmith/"
                                         "memory).")] = True,
    record: Annotated[Path | None, typer.Option(help="Record every model request and reply in DIR/transcript.json "
                                                     "(replayable in tests).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run saved in --out (interrupted, ended by "
                                                         "the model server, or with iterations left).")] = False,
) -> None:
    """Turn a PyTorch reference into a verified Triton kernel: generate, evaluate, profile, refine."""
    console = make_console()
    ref_path = resolve_path(problem, what="problem file")
    kernel = resolve_path(start_from).read_text() if start_from else None
    layer: dict[str, Any] = {"model": model, "base_url": base_url, "iterations": iterations, "trials": trials,
                             "scale": scale, "device": device and device.value, "generator": generator and generator.value,
                             "policy": policy and policy.value, "tolerance": tolerance and tolerance.value}
    layer = {k: v for k, v in layer.items() if v is not None}
    if not memory:
        layer["use_memory"] = False
    if record is not None:
        layer["record_dir"] = str(record)
    settings = _settings(layer)
    from tritonsmith.core.problem import Problem, ProblemError

    try:
        prob = Problem.from_file(ref_path)
    except ProblemError as exc:
        fail(str(exc))
    target = out or Path("tritonsmith-out") / safe_name(prob.name)
    if target.exists() and not target.is_dir():
        fail(f"--out {target} is a file; give a folder")
    _header(console, prob.name, ref_path, settings, target)
    with interruptible():
        try:
            check = precheck(prob, device=settings.device, scale=settings.scale, trials=settings.trials,
                             timeout_s=settings.eval_timeout_s)
            for line in check.lines:
                console.print(line)
            result = _run(console, ref_path, layer, kernel, target, resume=resume)
        except ProblemError as exc:
            fail(str(exc))
        except KeyboardInterrupt:  # before the loop's first state (the reference check, building the graph)
            console.print("[yellow]interrupted[/yellow] before the first attempt: nothing to keep")
            raise typer.Exit(INTERRUPTED_EXIT) from None
    _finish(console, result, target, ref_path)


def _settings(layer: dict[str, Any]) -> Settings:
    """The run's settings (argument > environment > default), every value checked before anything runs."""
    from tritonsmith.core.settings import Settings

    try:
        settings = Settings.resolve(layer)
    except ValueError as exc:
        fail(str(exc))
    for name, choices in (("policy", Policy), ("tolerance", Tolerance)):
        value = getattr(settings, name)
        if value not in {c.value for c in choices}:
            fail(f"{name} {value!r} (from TRITONSMITH_{name.upper()}) is not one of "
                 f"{', '.join(c.value for c in choices)}")
    return settings


def _header(console: Console, name: str, path: Path, settings: Settings, target: Path) -> None:
    """The run's first lines: what runs where with which settings, where the results and the memory go."""
    from tritonsmith.core.device import resolve_device

    device = resolve_device(settings.device)
    if settings.generator == "auto":
        generator = "llm" if settings.llm_configured else ("builtin (no model configured: set OPENAI_API_KEY "
                                                           "or --base-url to use one)")
    else:
        generator = settings.generator
    where = "Triton interpreter: correctness only, no timing" if device == "cpu" else "GPU timing"
    console.print(f"[bold]tritonsmith optimize[/bold] {escape(name)} ({escape(str(path))})")
    console.print(f"  device {device} ({where}); generator {escape(generator)}; {settings.iterations} iterations, "
                  f"{settings.trials} trials, policy {settings.policy}, tolerance {settings.tolerance}"
                  f"{', scaled shapes' if settings.scale else ''}")
    if settings.use_memory:
        from tritonsmith.memory import default_memory_dir

        console.print(f"  memory: {escape(str(settings.memory_dir or default_memory_dir()))} "
                      "(verified kernels are stored there; --no-memory runs without it)")
    else:
        console.print("  memory: off")
    console.print(f"  results: {escape(str(target))}/")


def _run(console: Console, ref_path: Path, layer: dict[str, Any], kernel: str | None, target: Path, *,
         resume: bool) -> OptimizeResult:
    """The loop, checkpointed in ``target/.tritonsmith`` so that ``--resume`` can continue it."""
    from tritonsmith.agents.llm import LLMConfigurationError, ModelUnavailableError
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.graphs import FileCheckpointer, OptimizeInterrupted, RunFiles, optimize

    run_files = RunFiles(target)
    try:
        thread = run_files.thread() if resume else run_files.new_thread(ref_path.name)
    except FileNotFoundError as exc:
        fail(str(exc))
    view = _Progress(console)
    nodes_log = logging.getLogger("tritonsmith.graphs.nodes")
    nodes_log.addFilter(_said_in_header)
    try:
        with view:
            return optimize(ref_path, start_from=kernel, on_event=view.on_event,
                            checkpointer=FileCheckpointer(run_files.checkpoints), thread_id=thread, resume=resume,
                            **layer)
    except OptimizeInterrupted as stop:
        written = write_outputs(stop.result, target, reference=ref_path)
        n = len(stop.result.attempts)
        kept = ", ".join(p.name for p in written)
        console.print(f"[yellow]interrupted[/yellow]: kept {n} finished attempt{'s' if n != 1 else ''} in "
                      f"{escape(str(target))} ({kept})")
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except ModelUnavailableError as exc:
        fail(str(exc), hint="--generator builtin runs without a model.")
    except (LLMConfigurationError, ProblemError, ValueError) as exc:
        fail(str(exc))
    finally:
        nodes_log.removeFilter(_said_in_header)


def _said_in_header(record: logging.LogRecord) -> bool:
    """Drop the loop's "no model configured" warning: the run's first lines already said it."""
    from tritonsmith.graphs import AUTO_BUILTIN_NOTE

    return record.getMessage() != AUTO_BUILTIN_NOTE


def _finish(console: Console, result: OptimizeResult, target: Path, ref_path: Path) -> None:
    from tritonsmith.graphs import AUTO_BUILTIN_NOTE

    for note in result.notes:
        if note != AUTO_BUILTIN_NOTE and not note.startswith("device: CPU"):  # both said in the first lines
            console.print(f"[yellow]note:[/yellow] {escape(note)}")
    written = write_outputs(result, target, reference=ref_path)
    colour = "green" if result.ok else "red"
    best = next((a for a in result.attempts if a.iteration == result.best_iteration), None)
    hybrid = f" ({policy_line(result.settings.get('policy'), best.torch_ops)})" if best and best.torch_ops else ""
    console.print(f"[{colour}]{result.status}[/{colour}]{escape(hybrid)}: {escape(result.reason)}")
    if result.slower:  # the floor: a verified kernel that loses to torch.compile is not presented as a win
        console.print(f"  [yellow]{escape(result.slower)}[/yellow]", soft_wrap=True)
    for path in written:
        console.print(f"  wrote {escape(str(path))}")
    last = result.attempts[-1] if result.attempts else None
    if not result.ok and last is not None and last.status == "model_error":
        console.print("  hint: --generator builtin runs without a model; --resume continues this run once the "
                      "model server answers", soft_wrap=True)
    if result.best_source is not None:
        from tritonsmith.graphs import check_command

        console.print(f"  check it: {escape(check_command(str(written[1]), str(written[0])))}", soft_wrap=True)
    raise typer.Exit(0 if result.ok else 1)


def policy_line(policy: str | None, torch_ops: tuple[str, ...]) -> str:
    """``"hybrid policy, torch computes: logsumexp"`` for a kernel PyTorch helped compute."""
    from tritonsmith.core.contract import torch_computes_line

    return f"{policy or 'hybrid'} policy, {torch_computes_line(torch_ops)}"


class _TotalColumn(ProgressColumn):
    """Time since the run started (the stage's own time is the elapsed column)."""

    def __init__(self, start: float) -> None:
        super().__init__()
        self.start = start

    def render(self, task: Any) -> Text:
        s = int(time.monotonic() - self.start)
        return Text(f"total {s // 60}:{s % 60:02d}", style="dim")


class _Progress:
    """One printed row per evaluated candidate; on a terminal, a live line with the stage and its elapsed time."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 _TotalColumn(time.monotonic()), console=console, transient=True,
                                 disable=not console.is_terminal)
        self.task = self.progress.add_task("starting the loop", total=None)
        self.iteration = 0
        self.device = "cpu"

    def __enter__(self) -> _Progress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def stage(self, text: str) -> None:
        self.progress.reset(self.task, description=text)

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "analyzed":
            self.device = event.get("device", self.device)
        if kind in ("analyzed", "retrieved"):
            self.stage(f"iteration {self.iteration + 1}: generating a candidate")
        elif kind == "generated":
            self.iteration = max(self.iteration, event["iteration"])
            self.stage(f"iteration {event['iteration']}: evaluating the {event['generator']} candidate")
        elif kind == "evaluated":
            self.console.print(_row(event, self.device))
            self.stage(f"iteration {event['iteration']}: profiling and deciding")
        elif kind == "decided":
            nxt = "generating a candidate" if event["action"] == "refine" else "saving"
            self.stage(f"iteration {self.iteration + (event['action'] == 'refine')}: {nxt}")


def _row(e: dict[str, Any], device: str) -> str:
    colour = _STATUS_COLOUR.get(e["status"], "white")
    if e.get("reward_basis") == "unmeasured":
        speed = "speed unmeasured (CPU)" if device == "cpu" else "speed unmeasured (no timing)"
    elif e.get("speedup") is not None:
        speed = f"{e['speedup']:.2f}x vs {e['reward_basis']}"
    else:
        speed = "-"
    msg = e.get("message", "")
    msg = escape(msg if len(msg) <= 90 else msg[:87] + "...")
    if e.get("torch_ops"):
        from tritonsmith.core.contract import torch_computes_line

        msg = f"[magenta]{escape(torch_computes_line(e['torch_ops']))}[/magenta]  {msg}"  # hybrid: say it
    return (f"  iter {e['iteration']} {escape('[' + e['generator'] + ']')} [{colour}]{e['status']}[/{colour}]  {speed}  "
            f"reward {e['reward']:.3f}  {msg}")


def write_outputs(result: OptimizeResult, out: Path, *, reference: Path) -> list[Path]:
    """Write the best kernel exactly as it was verified (``tritonsmith eval`` passes it, ``--from`` reads it
    back), a copy of its reference, ``check_NAME.py`` that runs one against the other, and the JSON/Markdown
    reports (which end with the ``tritonsmith eval`` command). The check script lives beside the kernel, not
    inside it: the evaluator refuses a kernel file that reads the environment or loads the reference."""
    from tritonsmith.graphs import check_command, check_script

    out.mkdir(parents=True, exist_ok=True)
    name = safe_name(result.problem)
    written = []
    check_md = ""
    if result.best_source is not None:
        ref_copy, kernel, check = out / f"{name}_reference.py", out / f"{name}_triton.py", out / f"check_{name}.py"
        ref_copy.write_text(reference.read_text())
        kernel.write_text(result.best_source.rstrip() + "\n")
        check.write_text(check_script(reference_file=ref_copy.name, kernel_name=kernel.name))
        written += [kernel, ref_copy, check]
        check_md = f"\n## Check it\n\n```bash\n{check_command(str(ref_copy), str(kernel))}\npython {check}\n```\n"
    report_json, report_md = out / "report.json", out / "report.md"
    report_json.write_text(json.dumps(result.to_dict(), indent=2))
    report_md.write_text(result.to_markdown() + check_md)
    return [*written, report_json, report_md]
