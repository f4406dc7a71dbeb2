"""Benchmark the built-in (no-LLM) generator over KernelBench-format levels 1 and 2.

GPU (the real run; needs tritonsmith.evaluator._evaluate):
    OUT=/tmp/out python benchmarks/builtin_generator.py /path/to/kernelbench-dev --variants 2 --budget-s 420
Per problem: up to N variants, each evaluated with evaluate(..., device="cuda", trials=5); the next
variant is chosen from the evaluator's verdicts (refinement without an LLM); the fastest correct one is
kept. Writes builtin_generator.json and builtin_generator.md into $OUT: per-problem table (emitted?,
status, speedup vs eager and vs torch.compile) and a summary (emit rate, correctness of emitted finals,
geomean speedup vs torch.compile over the correct ones). Problems not reached within --budget-s are
listed as "not run" (never counted as passes). --shard i/n splits the problem list over several runs.

CPU modes (no speedups are ever computed on the CPU):
    --trace-only : which tracer captures each reference whole (torch.fx / torch.export / dynamo)
    --emit-only  : which problems the generator can write, and with which kernels
    --dry        : scaled-down problems through the Triton interpreter (correctness only), --limit N
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("builtin_generator")


def problems(root: Path, levels: list[int], shard: str | None) -> list[Path]:
    files = [f for lv in levels for f in sorted((root / f"level{lv}").glob("*.py"), key=_order)]
    if shard:
        i, n = (int(x) for x in shard.split("/"))
        files = files[i::n]
    return files


def _order(p: Path) -> tuple[int, str]:
    head = p.name.split("_", 1)[0]
    return (int(head) if head.isdigit() else 0, p.name)


# -- tracer comparison ----------------------------------------------------------------------------
def trace_only(files: list[Path]) -> dict[str, Any]:
    import warnings

    import torch

    from tritonsmith.core.problem import Problem
    from tritonsmith.core.problem_meta import exec_reference, instantiate

    warnings.filterwarnings("ignore")
    rows = []
    for f in files:
        p = Problem.from_file(f)
        module = exec_reference(p.source, p.name)
        row: dict[str, Any] = {"problem": f"level{p.level}/{p.name}"}
        for tracer in ("fx", "export", "dynamo"):
            model, _, inputs = instantiate(module, p.name, "meta")
            try:
                if tracer == "fx":
                    torch.fx.symbolic_trace(model)
                elif tracer == "export":
                    torch.export.export(model, tuple(inputs)).run_decompositions()
                else:
                    torch._dynamo.reset()
                    torch._dynamo.export(model)(*inputs)  # whole graph or an error (graph break)
                row[tracer] = True
            except Exception as exc:  # any failure means "did not trace": recorded, not raised
                row[tracer] = False
                row[f"{tracer}_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
        rows.append(row)
    total = {t: sum(r[t] for r in rows) for t in ("fx", "export", "dynamo")}
    return {"mode": "trace-only", "problems": len(rows), "traced": total, "rows": rows}


# -- emit rate ------------------------------------------------------------------------------------
def emit_only(files: list[Path]) -> dict[str, Any]:
    from tritonsmith.agents.builtin import summarize
    from tritonsmith.core.problem import Problem

    rows = []
    for f in files:
        p = Problem.from_file(f)
        s = summarize(p)
        rows.append({"problem": f"level{p.level}/{p.name}", "emitted": s.emittable, "kernels": list(s.kernels),
                     "torch_ops": list(s.torch_ops), "reason": s.reason})
    n = sum(r["emitted"] for r in rows)
    return {"mode": "emit-only", "problems": len(rows), "emitted": n, "emit_rate": n / max(len(rows), 1),
            "rows": rows}


# -- generation + evaluation ----------------------------------------------------------------------
def _evaluate(problem: Any, source: str, device: str) -> Any:
    try:
        from tritonsmith.evaluator._evaluate import evaluate
    except ImportError:
        if device != "cpu":
            raise SystemExit("tritonsmith.evaluator._evaluate is not available: the GPU run needs the evaluator")
        return _interpret(problem, source)
    return evaluate(problem, source, device=device, trials=5 if device == "cuda" else 2,
                    benchmark=device == "cuda")


def _interpret(problem: Any, source: str) -> Any:
    """CPU fallback while the evaluator is missing: run this script's --check-one in an interpreter process."""
    from tritonsmith.core.results import EvalResult, EvalStatus

    with tempfile.TemporaryDirectory() as d:
        ref, cand = Path(d) / "ref.py", Path(d) / "cand.py"
        ref.write_text(problem.source)
        cand.write_text(source)
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        try:
            proc = subprocess.run([sys.executable, __file__, "--check-one", str(ref), str(cand)], env=env,
                                  capture_output=True, text=True, timeout=600)
            ok, detail = proc.returncode == 0, (proc.stdout + proc.stderr)[-800:]
        except subprocess.TimeoutExpired:
            ok, detail = False, "timed out"
    status = EvalStatus.CORRECT if ok else EvalStatus.WRONG_OUTPUT
    return EvalResult(status=status, message=detail.strip().splitlines()[-1] if detail.strip() else "",
                      problem=problem.name, device="cpu", device_name="interpreter", tolerance="kernelbench",
                      scaling_note=problem.scaling_note)


def check_one(ref_path: str, cand_path: str) -> int:
    import importlib.util

    import torch

    from tritonsmith.core.problem_meta import exec_reference, flatten_outputs

    ref = exec_reference(Path(ref_path).read_text(), "ref")
    spec = importlib.util.spec_from_file_location("cand", cand_path)
    assert spec is not None and spec.loader is not None
    cand = importlib.util.module_from_spec(spec)
    sys.modules["cand"] = cand
    spec.loader.exec_module(cand)
    init = ref.get_init_inputs()
    torch.manual_seed(0)
    model = ref.Model(*init)
    torch.manual_seed(0)
    new = cand.ModelNew(*init)
    for trial in range(2):
        torch.manual_seed(100 + trial)
        inputs = ref.get_inputs()
        with torch.no_grad():
            want, got = flatten_outputs(model(*inputs)), flatten_outputs(new(*inputs))
        for g, w in zip(got, want, strict=True):
            same = (g == w).all() if not w.is_floating_point() else torch.allclose(g.double(), w.double(),
                                                                                     atol=1e-4, rtol=1e-4)
            if g.shape != w.shape or not bool(same):
                print(f"mismatch in trial {trial}")
                return 1
    print("correct")
    return 0


def run_problems(files: list[Path], device: str, variants: int, budget_s: float, scale: bool) -> dict[str, Any]:
    from tritonsmith.agents.base import Attempt, GenerationRequest
    from tritonsmith.agents.builtin import BuiltinGenerator
    from tritonsmith.core.problem import Problem, ProblemError

    gen = BuiltinGenerator()
    start = time.monotonic()
    state: dict[str, dict[str, Any]] = {}
    order = []
    for f in files:
        p = Problem.from_file(f)
        key = f"level{p.level}/{p.name}"
        order.append(key)
        if scale:
            try:
                p = p.scaled()
            except ProblemError as exc:
                state[key] = {"problem": p, "row": {"problem": key, "emitted": False, "status": "not_scalable",
                                                    "note": str(exc)}, "history": [], "done": True}
                continue
        state[key] = {"problem": p, "row": {"problem": key, "emitted": False, "status": "not_run"},
                      "history": [], "done": False}
    # round-robin: every problem gets its first variant before any gets a second
    for round_ in range(variants):
        for key in order:
            s = state[key]
            if s["done"]:
                continue
            if time.monotonic() - start > budget_s:
                s["row"].setdefault("note", "time budget reached")
                continue
            cand = gen.generate(GenerationRequest(problem=s["problem"], iteration=round_, history=s["history"],
                                                  device=device))
            row = s["row"]
            if cand.source is None:
                s["done"] = True
                if round_ == 0:
                    row.update(status="not_emitted", note=cand.note)
                continue
            row["emitted"] = True
            t0 = time.monotonic()
            res = _evaluate(s["problem"], cand.source, device)
            log.info("%s %s: %s (%.1fs)", key, cand.variant, res.status, time.monotonic() - t0)
            s["history"].append(Attempt(iteration=round_, source=cand.source, result=res,
                                        feedback=res.message[:300], reward=1.0 if res.ok else 0.0,
                                        generator=gen.name, variant=cand.variant))
            _update_best(row, cand, res)
            if cand.exhausted or (res.ok and device == "cpu"):
                s["done"] = True
    return summarize_rows([state[k]["row"] for k in order], device, time.monotonic() - start)


def _update_best(row: dict[str, Any], cand: Any, res: Any) -> None:
    row.setdefault("attempts", []).append({"variant": cand.variant, "status": str(res.status),
                                           "speedup_vs_compile": res.speedup_vs_compile})
    best = row.get("best_ms")
    ms = res.benchmark.candidate.median_ms if res.ok and res.benchmark else None
    if res.ok and (best is None or (ms is not None and ms < best)):
        row.update(status="correct", variant=cand.variant, best_ms=ms, note=cand.note,
                   speedup_vs_eager=res.speedup_vs_eager, speedup_vs_compile=res.speedup_vs_compile,
                   scaling=res.scaling_note)
    elif row.get("status") != "correct":
        row.update(status=str(res.status), variant=cand.variant, note=cand.note, message=res.message[:200])


def summarize_rows(rows: list[dict[str, Any]], device: str, wall_s: float) -> dict[str, Any]:
    emitted = [r for r in rows if r["emitted"]]
    evaluated = [r for r in emitted if r["status"] != "not_run"]
    correct = [r for r in evaluated if r["status"] == "correct"]
    speed = [r["speedup_vs_compile"] for r in correct if r.get("speedup_vs_compile")]
    geo = math.exp(sum(math.log(s) for s in speed) / len(speed)) if speed else None
    return {"mode": "gpu" if device == "cuda" else "dry-cpu", "device": device, "wall_s": round(wall_s, 1),
            "problems": len(rows), "emitted": len(emitted), "emit_rate": len(emitted) / max(len(rows), 1),
            "evaluated": len(evaluated), "correct": len(correct),
            "correct_rate_of_evaluated": len(correct) / max(len(evaluated), 1),
            "geomean_speedup_vs_compile": geo if device == "cuda" else None, "rows": rows}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# builtin generator: {result['mode']}", "", "```", json.dumps(
        {k: v for k, v in result.items() if k != "rows"}, indent=1), "```", ""]
    rows = result["rows"]
    if not rows:
        return "\n".join(lines)
    cols = [c for c in ("problem", "emitted", "status", "variant", "speedup_vs_eager", "speedup_vs_compile",
                        "fx", "export", "dynamo", "kernels", "torch_ops", "note", "reason") if c in
            {k for r in rows for k in r}]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            v = f"{v:.2f}" if isinstance(v, float) else v
            cells.append(str(v).replace("|", "/")[:140])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", default="../shared/kernelbench-dev")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--variants", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--shard", default=None, help="i/n: every n-th problem starting at i")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--trace-only", action="store_true")
    ap.add_argument("--emit-only", action="store_true")
    ap.add_argument("--dry", action="store_true", help="CPU interpreter on scaled problems (correctness only)")
    ap.add_argument("--check-one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.check_one:
        return check_one(*args.check_one)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    files = problems(Path(args.root), [int(x) for x in args.levels.split(",")], args.shard)[: args.limit]
    if args.trace_only:
        result, stem = trace_only(files), "builtin_generator_trace"
    elif args.emit_only:
        result, stem = emit_only(files), "builtin_generator_emit"
    elif args.dry:
        result, stem = run_problems(files, "cpu", args.variants, args.budget_s, scale=True), "builtin_generator_dry"
    else:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: use --dry for the CPU interpreter")
        result, stem = run_problems(files, "cuda", args.variants, args.budget_s, scale=False), "builtin_generator"
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    result["command"] = " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])])
    result["date"] = time.strftime("%Y-%m-%d %H:%M:%S")
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1, default=str))
    md = markdown(result)
    (out / f"{stem}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
