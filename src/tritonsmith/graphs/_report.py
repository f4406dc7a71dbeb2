"""Reports of an optimisation run: Markdown, the best kernel as written to disk, and its self-check script."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonsmith.core.contract import HYBRID_REWARD_FACTOR, torch_computes_line

if TYPE_CHECKING:
    from tritonsmith.graphs.optimizer import OptimizeResult

__all__ = ["check_command", "check_script", "markdown_report"]


def _speed(speedup: float | None, basis: str, device: str = "cpu") -> str:
    if basis == "unmeasured":
        return "unmeasured (CPU)" if device == "cpu" else "unmeasured (no timing)"
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
                     f"({_speed(best.speedup, best.reward_basis, result.device)})")
        if best.torch_ops:
            lines.append(f"- **hybrid kernel** ({result.settings.get('policy', 'hybrid')} policy): "
                         f"{torch_computes_line(best.torch_ops)}; its reward is {HYBRID_REWARD_FACTOR:g}x a "
                         "pure-Triton kernel's")
    if result.slower:
        lines.append(f"- **floor**: {result.slower}")
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
        if a.torch_ops:
            msg = f"{torch_computes_line(a.torch_ops)}; {msg}"
        lines.append(f"| {a.iteration} | {a.generator} | {a.variant or ''} | {a.status} | "
                     f"{_speed(a.speedup, a.reward_basis, result.device)} | {a.reward:.3f} | {msg} |")
    for a in result.attempts:
        if a.error:  # a generator bug: its traceback, so it can be reported and fixed
            lines += ["", f"## Iteration {a.iteration}: the {a.generator} generator failed", "", "```text",
                      a.error.rstrip()[-4000:], "```"]
    if result.best_source:
        lines += ["", "## Best kernel", "", "```python", result.best_source.rstrip(), "```"]
    return "\n".join(lines) + "\n"


_CHECK = '''\
"""Check {kernel} against {reference} on fresh random inputs (Triton's interpreter without a GPU).

The evaluator's verdict (anti-cheating checks, 5 trials, timing on a GPU): tritonsmith eval {reference} {kernel}
"""

import importlib.util
import os
import pathlib
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernel file defines its @triton.jit kernels

HERE = pathlib.Path(__file__).resolve().parent


def load(name, filename):
    spec = importlib.util.spec_from_file_location(name, HERE / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ref, new = load("reference", {reference!r}), load("candidate", {kernel!r})
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    init = ref.get_init_inputs()
    model = ref.Model(*init).to(dev)
    torch.manual_seed(0)
    candidate = new.ModelNew(*init).to(dev)
    candidate.load_state_dict(model.state_dict(), strict=False)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    with torch.no_grad():
        want, got = model(*inputs), candidate(*inputs)
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    same_shapes = len(got) == len(want) and all(g.shape == w.shape for g, w in zip(got, want))
    err = max((g.float() - w.float()).abs().max().item() for g, w in zip(got, want)) if same_shapes else float("inf")
    ok = same_shapes and err < 1e-3
    print(f"max abs error vs the reference: {{err:.3e}}", "(ok)" if ok else "(CHECK)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
'''


def check_script(*, reference_file: str, kernel_name: str) -> str:
    """A small script, written beside the kernel, that runs it against the reference copy (same folder)."""
    return _CHECK.format(reference=reference_file, kernel=kernel_name)


def check_command(reference: str, kernel: str) -> str:
    """The ``tritonsmith eval`` command that re-checks a written kernel."""
    import shlex

    return f"tritonsmith eval {shlex.quote(reference)} {shlex.quote(kernel)}"
