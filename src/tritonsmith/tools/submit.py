"""``submit_kernel``: how a model hands in its candidate; and what it reads when its tool arguments are bad."""

from __future__ import annotations

from langchain_core.tools import BaseTool, tool

__all__ = ["SUBMIT_TOOL_NAME", "bad_arguments", "make_submit_tool", "submit_kernel"]

SUBMIT_TOOL_NAME = "submit_kernel"


@tool(SUBMIT_TOOL_NAME, parse_docstring=True)
def submit_kernel(source: str, notes: str = "") -> str:
    """Submit your candidate for evaluation (the evaluator's full verdict). Call this once, when it is ready.

    Args:
        source: the COMPLETE Python file: imports, the @triton.jit kernel(s), their launcher, and
            `class ModelNew(nn.Module)` with the same constructor arguments as the reference Model.
        notes: one or two sentences on the idea behind this version (optional).
    """
    return "submitted"  # never executed: the generator reads the call's arguments


def make_submit_tool() -> BaseTool:
    """The ``submit_kernel`` tool (one instance: it is never run, the generator reads the call's arguments)."""
    return submit_kernel


def bad_arguments(error: Exception) -> str:
    """What the model reads when its tool arguments do not validate."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        parts = [f"{'.'.join(map(str, e.get('loc', ()))) or 'arguments'}: {e.get('msg', '')}" for e in errors()]
        return "invalid arguments: " + "; ".join(parts)
    return f"invalid arguments: {error}"
