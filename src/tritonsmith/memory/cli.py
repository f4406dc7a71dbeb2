"""``tritonsmith memory ...``: seed, search, list, show, export, import, stats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from tritonsmith.memory._record import KernelRecord, RecordKind
from tritonsmith.memory._store import KernelMemory, SearchFilters

__all__ = ["memory_app"]

memory_app = typer.Typer(help="The kernel memory: verified kernels to learn from.", no_args_is_help=True)
console = Console()

DirOpt = Annotated[Path | None, typer.Option("--dir", help="store directory (default: $TRITONSMITH_MEMORY_DIR "
                                                          "or ~/.local/share/tritonsmith/memory)")]
UrlOpt = Annotated[str | None, typer.Option("--url", help="Chroma server, e.g. http://host:8000 "
                                                          "(default: $TRITONSMITH_MEMORY_URL)")]
EmbOpt = Annotated[str | None, typer.Option("--embedder", help="structural | minilm | hybrid (new stores only)")]


def _open(directory: Path | None, url: str | None, embedder: str | None = None, seed: bool = False) -> KernelMemory:
    from tritonsmith.memory._open import open_memory

    return open_memory(directory, url=url, embedder=embedder, seed=seed)


def _speed(r: KernelRecord) -> str:
    ev = r.evaluation
    if ev.speedup_vs_eager is None:
        return "not measured"
    c = f" / {ev.speedup_vs_compile:.2f}x compile" if ev.speedup_vs_compile else ""
    return f"{ev.speedup_vs_eager:.2f}x eager{c}"


@memory_app.command()
def seed(directory: DirOpt = None, url: UrlOpt = None, embedder: EmbOpt = None) -> None:
    """Add the packaged seed library (idempotent)."""
    from tritonsmith.memory._seeds import seed_memory

    mem = _open(directory, url, embedder)
    results = seed_memory(mem)
    added = sum(r.status != "duplicate" for r in results)
    console.print(f"{added} seed kernel(s) added or updated, {len(results) - added} already present "
                  f"in {mem.location}")


@memory_app.command()
def search(
    query: Annotated[str, typer.Argument(help="free text, or a path to a KernelBench-format problem file")],
    k: Annotated[int, typer.Option("-k", help="how many")] = 3,
    device: Annotated[str | None, typer.Option(help="rank kernels measured on this GPU's class higher")] = None,
    show_code: Annotated[bool, typer.Option("--code/--no-code")] = False,
    directory: DirOpt = None,
    url: UrlOpt = None,
) -> None:
    """Search the memory by a problem file or text."""
    from tritonsmith.core.problem import Problem

    mem = _open(directory, url, seed=True)
    path = Path(query)
    q: str | Problem = Problem.from_file(path) if path.suffix == ".py" and path.is_file() else query
    hits = mem.search(q, k=k, device_name=device)
    if not hits:
        console.print("no match")
        raise typer.Exit(1)
    for h in hits:
        console.print(f"[bold]{h.record.id[:12]}[/] {h.record.problem_name}  score {h.score:.3f}  ({h.reason})")
        if show_code:
            console.print(Syntax(h.record.kernel_source, "python"))


@memory_app.command("list")
def list_(
    kind: Annotated[RecordKind | None, typer.Option(help="success or lesson")] = None,
    limit: Annotated[int, typer.Option(help="at most this many")] = 50,
    directory: DirOpt = None,
    url: UrlOpt = None,
) -> None:
    """List records, newest first."""
    mem = _open(directory, url)
    table = Table("id", "kind", "problem", "device", "speed", "origin")
    for r in mem.list(SearchFilters(kind=kind), limit=limit):
        table.add_row(r.id[:12], r.kind.value, r.problem_name, r.evaluation.device_name, _speed(r), r.origin)
    console.print(table)


@memory_app.command()
def show(record_id: Annotated[str, typer.Argument(help="an id or a unique prefix")],
         directory: DirOpt = None, url: UrlOpt = None) -> None:
    """Show one record: its evaluation, lineage and kernel code."""
    mem = _open(directory, url)
    rec = mem.get(record_id)
    if rec is None:
        matches = [r for r in mem.list() if r.id.startswith(record_id)]
        if len(matches) != 1:
            console.print(f"{'no' if not matches else 'more than one'} record matches {record_id!r}")
            raise typer.Exit(1)
        rec = matches[0]
    ev = rec.evaluation
    console.print(f"[bold]{rec.id}[/] {rec.kind.value}: {rec.problem_name} (level {rec.problem_level})\n"
                  f"status {ev.status}, tolerance {ev.tolerance}, {ev.device_name}, {_speed(rec)}\n"
                  f"torch {ev.torch_version}, triton {ev.triton_version}; origin {rec.origin}; "
                  f"parent {rec.lineage.parent_id}, iteration {rec.lineage.iteration}, "
                  f"generator {rec.lineage.generator}\nsignature: {rec.signature}")
    if ev.error:
        console.print(f"error: {ev.error}")
    console.print(Syntax(rec.kernel_source, "python"))


@memory_app.command("export")
def export_(path: Annotated[Path, typer.Argument(help="JSON-lines file to write")],
            directory: DirOpt = None, url: UrlOpt = None) -> None:
    """Export every record as JSON lines."""
    n = _open(directory, url).export_records(path)
    console.print(f"{n} record(s) written to {path}")


@memory_app.command("import")
def import_(path: Annotated[Path, typer.Argument(help="JSON-lines file from `memory export`")],
            directory: DirOpt = None, url: UrlOpt = None, embedder: EmbOpt = None) -> None:
    """Import records from an export (duplicates are skipped)."""
    results = _open(directory, url, embedder).import_records(path)
    added = sum(r.status != "duplicate" for r in results)
    console.print(f"{added} record(s) added or updated, {len(results) - added} duplicate(s)")


@memory_app.command()
def stats(directory: DirOpt = None, url: UrlOpt = None) -> None:
    """Counts by kind, device class and origin."""
    s = _open(directory, url).stats()
    console.print(f"{s.location} (embedder {s.embedder}): {s.total} records, {s.successes} successes, "
                  f"{s.lessons} lessons, {s.problems} problems")
    console.print(f"by device class: {s.by_device_class}\nby origin: {s.by_origin}")
