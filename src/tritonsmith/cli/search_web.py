"""``tritonsmith search-web``: the cached, time-limited web search the LLM generator may use."""

from __future__ import annotations

import json
from typing import Annotated

import typer

__all__ = ["web_search_command"]

EPILOG = ('Example: tritonsmith search-web "triton tl.dot tf32" --trusted. Without network it says why and '
          "exits with 1.")


def web_search_command(
    query: Annotated[str, typer.Argument(help="what to search for")],
    max_results: Annotated[int, typer.Option(min=1, help="number of results")] = 5,
    domain: Annotated[list[str] | None, typer.Option(help="keep only results from this domain (repeatable)")] = None,
    trusted: Annotated[bool, typer.Option(help="keep only Triton/PyTorch docs, GitHub and paper sites")] = False,
    timeout_s: Annotated[float, typer.Option(min=0.1, help="overall time limit in seconds")] = 8.0,
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
