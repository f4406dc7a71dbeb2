"""The ``tritonsmith`` typer app: its options, and its commands in the order they are used."""

from __future__ import annotations

import logging
import os
import sys
from typing import Annotated

import typer

from tritonsmith.cli import bench, eval, optimize, profile, report, search_web
from tritonsmith.cli._common import PIPED_WIDTH
from tritonsmith.cli._interrupt import INTERRUPTED_EXIT, exit_now
from tritonsmith.cli.memory import memory_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="tritonsmith",
    help="Turn PyTorch reference code into fast, verified Triton kernels.",
    epilog="Start with: tritonsmith optimize example:softmax_reference.py --out tritonsmith-out. "
           "Each command's --help has an example.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from tritonsmith.core.version import code_version

        typer.echo(f"tritonsmith {code_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """tritonsmith: PyTorch reference in, verified Triton kernels out."""
    if verbose:
        logging.getLogger("tritonsmith").setLevel(logging.INFO)


app.command("optimize", epilog=optimize.EPILOG)(optimize.optimize_command)
app.command("eval", epilog=eval.EPILOG)(eval.eval_command)
app.command("bench", epilog=bench.EPILOG)(bench.bench_command)
app.command("report", epilog=report.EPILOG)(report.report_command)
app.command("profile", epilog=profile.EPILOG)(profile.profile_command)
app.command("search-web", epilog=search_web.EPILOG)(search_web.web_search_command)
app.add_typer(memory_app, name="memory")  # typer lists command groups last anyway


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not sys.stderr.isatty():  # typer's error and help boxes, piped: no wrapping at 80 columns mid-phrase
        os.environ.setdefault("TERMINAL_WIDTH", str(PIPED_WIDTH))  # read when typer first formats one
    try:
        app()
    except SystemExit as exc:
        if exc.code == INTERRUPTED_EXIT:  # what finished is written: exit now, whatever threads are left
            exit_now(INTERRUPTED_EXIT)
        raise
