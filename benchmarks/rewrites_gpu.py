"""Do the built-in generator's algebraic rewrites pay on the GPU? (issue #19)

For each KernelBench problem where a rewrite of ``agents/builtin/_rewrite.py`` fires, evaluates (on CUDA, the
full evaluator: correctness trials, anti-cheating checks, timing against eager and torch.compile) the
candidate the generator tries first (rewritten) and its ``no-rewrites`` variant (the same pipeline on the
graph as traced), and prints one row per problem: each kernel's time, its speedups with their 95% interval,
and the rewrite's gain (plain time / rewritten time).

Problems are picked cheaply first (their source must name a matmul and a reduction, pooling or ``tril``/
``triu``), then traced on the meta device to see whether a rewrite fires. About 10 s per firing problem on
an H200 (the dev split: one problem, 98_Matmul_AvgPool_GELU_Scale_Max; well under 4 minutes).

    python benchmarks/rewrites_gpu.py KERNELBENCH_DIR [--levels 1 2 3] [--json OUT.json] [--trials 3]
    python benchmarks/rewrites_gpu.py KERNELBENCH_DIR --problems level2/98_Matmul_AvgPool_GELU_Scale_Max

Writes the rows (with the date, device and command) to ``--json``; prints the Markdown table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

_MATMUL = re.compile(r"nn\.Linear|torch\.matmul|torch\.mm\b|torch\.bmm|F\.linear|\s@\s|\.mm\(|addmm")
_AFTER = re.compile(r"\.sum\(|torch\.sum|\.mean\(|torch\.mean|avg_pool|AvgPool|tril|triu|\*|/")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernelbench", type=Path, help="a KernelBench tree with level1/ level2/ ... folders")
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--problems", nargs="+", default=None, help="only these (level2/98_Matmul_...), no scan")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    ap.add_argument("--trials", type=int, default=3, help="correctness trials per evaluation")
    args = ap.parse_args(argv)
    if not args.kernelbench.is_dir():
        ap.error(f"{args.kernelbench} is not a directory")
    if args.trials < 1:
        ap.error("--trials must be at least 1")
    return args


def shortlist(kernelbench: Path, levels: Sequence[int], problems: Sequence[str] | None = None) -> list[Path]:
    """Problem files worth tracing: named ones, else those whose source has a matmul and something after it
    that a rewrite reads (a sum, a mean, pooling, tril/triu, a scalar multiply or divide)."""
    if problems:
        return [kernelbench / (p if p.endswith(".py") else f"{p}.py") for p in problems]
    out = []
    for level in levels:
        for path in sorted((kernelbench / f"level{level}").glob("*.py")):
            text = path.read_text()
            if _MATMUL.search(text) and _AFTER.search(text):
                out.append(path)
    return out


def _ratio(bench: Any, base: str) -> tuple[float | None, tuple[float, float] | None]:
    if base == "eager":
        return bench.speedup_vs_eager, bench.speedup_ci_vs_eager
    return bench.speedup_vs_compile, bench.speedup_ci_vs_compile


def measurement(result: Any) -> dict[str, Any]:
    """What a row keeps of one ``EvalResult``: the verdict, and for a correct timed one the figures."""
    out: dict[str, Any] = {"status": result.status.value, "message": result.message[:200]}
    bench = result.benchmark
    if result.ok and bench is not None:
        out["ms"] = bench.candidate.median_ms
        for base in ("eager", "compile"):
            s, ci = _ratio(bench, base)
            out[f"vs_{base}"] = s
            out[f"ci_{base}"] = list(ci) if ci else None
    return out


def _x(m: dict[str, Any], base: str) -> str:
    s, ci = m.get(f"vs_{base}"), m.get(f"ci_{base}")
    if s is None:
        return "-"
    return f"{s:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _cell(m: dict[str, Any]) -> list[str]:
    if m.get("ms") is None:
        return [f"{m['status']}: {m['message'][:60]}", "", ""]
    return [f"{m['ms']:.4f}", _x(m, "eager"), _x(m, "compile")]


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The Markdown table: one row per problem; the gain is plain ms / rewritten ms (> 1: the rewrite pays)."""
    heads = ["problem", "rewrites", "variant", "rewritten ms", "vs eager", "vs compile", "no-rewrites ms",
             "vs eager", "vs compile", "gain"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in rows:
        a, b = r["rewritten"], r["plain"]
        gain = f"{b['ms'] / a['ms']:.2f}x" if a.get("ms") and b.get("ms") else "-"
        cells = [f"`{r['problem']}`", ", ".join(r["rewrites"]), r["variant"], *_cell(a), *_cell(b), gain]
        lines.append("| " + " | ".join(cells) + " |")
    if not rows:
        lines.append("| (no problem where a rewrite fires) |" + " |" * (len(heads) - 1))
    return "\n".join(lines)


def sources(problem: Any) -> tuple[list[str], str, str, str] | None:
    """(rewrites, first variant's key, its source, the no-rewrites source), or None where none fires."""
    from tritonsmith.agents.builtin import _plan, menu_for, variant_label
    from tritonsmith.agents.builtin._emit import emit_module
    from tritonsmith.agents.builtin._trace import export_problem, trace_problem

    exported = export_problem(problem)
    if not trace_problem(problem, {}, exported).rewrites:  # one trace on the meta device: most problems stop here
        return None
    menu, _ = menu_for(problem, exported)
    plain = next((v for v in menu if v.key == "no-rewrites"), None)
    if plain is None:
        return None
    written = []
    for variant in (menu[0], plain):
        traced, plan = _plan(problem, variant.options, exported)
        written.append((traced.rewrites, emit_module(problem.name, problem.source, traced, plan, variant.overrides,
                                                      variant_label(variant, traced))))
    return written[0][0], menu[0].key, written[0][1], written[1][1]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from tritonsmith.core.problem import Problem
    from tritonsmith.evaluator import evaluate

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: speedups are never measured on the CPU interpreter", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    start = time.monotonic()
    for path in shortlist(args.kernelbench, args.levels, args.problems):
        problem = Problem.from_file(path)
        try:
            found = sources(problem)
        except Exception as exc:  # a problem the generator cannot write is not one a rewrite fires on
            print(f"skip {path.parent.name}/{path.stem}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            continue
        if found is None:
            continue
        rewrites, key, rewritten, plain = found
        row = {"problem": f"{path.parent.name}/{path.stem}", "rewrites": rewrites, "variant": key,
               "rewritten": measurement(evaluate(problem, rewritten, device="cuda", trials=args.trials)),
               "plain": measurement(evaluate(problem, plain, device="cuda", trials=args.trials))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "device": torch.cuda.get_device_name(),
            "command": " ".join(["python", "benchmarks/rewrites_gpu.py", *(argv or sys.argv[1:])]),
            "wall_s": round(time.monotonic() - start, 1), "rows": rows}, indent=1))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
