"""Reports of an optimisation run: Markdown, and the best kernel as a runnable file."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonsmith.graphs.optimizer import OptimizeResult

__all__ = ["markdown_report", "runnable_kernel"]


def _speed(speedup: float | None, basis: str) -> str:
    if basis == "unmeasured":
        return "unmeasured (no GPU timing)"
    if speedup is None:
        return "-"
    return f"{speedup:.2f}x vs {basis}"


def markdown_report(result: OptimizeResult) -> str:
    lines = [f"# tritonsmith optimize: {result.problem}", "",
             f"- **status**: {result.status} — {result.reason}",
             f"- **device**: {result.device}", f"- **generator**: {result.generator}"]
    if result.best_iteration is not None:
        best = next(a for a in result.attempts if a.iteration == result.best_iteration)
        lines.append(f"- **best**: iteration {best.iteration}, reward {best.reward:.3f} "
                     f"({_speed(best.speedup, best.reward_basis)})")
    tokens = result.input_tokens + result.output_tokens
    if tokens:
        cost = f", cost ${result.cost_usd:.4f}" if result.cost_usd is not None else ", cost not priced"
        lines.append(f"- **tokens**: {result.input_tokens} in / {result.output_tokens} out{cost}")
    for note in result.notes:
        lines.append(f"- note: {note}")
    lines += ["", "| iteration | generator | variant | status | speed | reward | message |",
              "|---|---|---|---|---|---|---|"]
    for a in result.attempts:
        msg = a.message.replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(f"| {a.iteration} | {a.generator} | {a.variant or ''} | {a.status} | "
                     f"{_speed(a.speedup, a.reward_basis)} | {a.reward:.3f} | {msg} |")
    for a in result.attempts:
        if a.error:  # a generator bug: its traceback, so it can be reported and fixed
            lines += ["", f"## Iteration {a.iteration}: the {a.generator} generator failed", "", "```text",
                      a.error.rstrip()[-4000:], "```"]
    if result.best_source:
        lines += ["", "## Best kernel", "", "```python", result.best_source.rstrip(), "```"]
    return "\n".join(lines) + "\n"


_PRELUDE = '''\
if __name__ == "__main__":  # run directly: use the Triton interpreter when there is no GPU
    import os as _os

    import torch as _torch

    if not _torch.cuda.is_available():
        _os.environ.setdefault("TRITON_INTERPRET", "1")
'''

_FOOTER = '''

if __name__ == "__main__":  # check this kernel against its reference on fresh random inputs
    import importlib.util as _ilu
    import pathlib as _pathlib

    _spec = _ilu.spec_from_file_location("_reference", _pathlib.Path(__file__).with_name({reference!r}))
    _ref = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_ref)
    _dev = "cuda" if _torch.cuda.is_available() else "cpu"
    _torch.manual_seed(0)
    _init = _ref.get_init_inputs()
    _model = _ref.Model(*_init).to(_dev)
    _torch.manual_seed(0)
    _new = ModelNew(*_init).to(_dev)
    _new.load_state_dict(_model.state_dict(), strict=False)
    _inputs = [x.to(_dev) if isinstance(x, _torch.Tensor) else x for x in _ref.get_inputs()]
    with _torch.no_grad():
        _want, _got = _model(*_inputs), _new(*_inputs)
    _err = (_got.float() - _want.float()).abs().max().item()
    print(f"max abs error vs the reference: {{_err:.3e}}", "(ok)" if _err < 1e-3 else "(CHECK)")
'''


def _docstring_end(source: str) -> int:
    """Number of lines taken by a leading module docstring (0 without one)."""
    import ast

    try:
        body = ast.parse(source).body
    except SyntaxError:
        return 0
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno or 0
    return 0


def runnable_kernel(source: str, reference_file: str) -> str:
    """``source`` plus a ``__main__`` prelude/footer that runs it against ``reference_file`` (same folder)."""
    lines = source.rstrip().splitlines()
    cut = _docstring_end(source)
    for i, line in enumerate(lines):  # keep a module docstring / __future__ imports first
        if re.match(r"\s*from __future__ import", line):
            cut = i + 1
    head, tail = "\n".join(lines[:cut]), "\n".join(lines[cut:])
    body = (head + "\n" if head else "") + _PRELUDE + "\n" + tail
    return body + _FOOTER.format(reference=reference_file)
