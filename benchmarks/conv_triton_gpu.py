"""The built-in generator's Triton convolutions against cuDNN (torch eager) and torch.compile, on the GPU.

For every level-1 convolution problem of a KernelBench directory (file name containing ``conv``), the
generator's candidate for each requested variant (``default``: the implicit-GEMM kernel of ``_convgemm``,
or the depthwise window kernel of ``_dwconv``) goes through the evaluator on CUDA: correctness on fresh
inputs, then candidate, eager (cuDNN) and torch.compile timed in one worker. Prints a table and writes
the rows as JSON. A candidate that still calls torch for its convolution is reported as such, never
timed as a Triton kernel.

    python benchmarks/conv_triton_gpu.py KBDIR [--json OUT.json] [--variants default conv-64x64] [--only 56 63]

About 10-15 s per problem and variant on an H200 (most of it torch.compile's first call). ``--device cpu``
checks correctness only, on the Triton interpreter at scaled-down shapes (the evaluator's ``scale``): no
timing is measured or printed there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from tritonsmith.agents.builtin import _plan  # noqa: E402
from tritonsmith.agents.builtin._emit import emit_module  # noqa: E402
from tritonsmith.agents.builtin._variants import variant_menu  # noqa: E402
from tritonsmith.core.problem import Problem  # noqa: E402
from tritonsmith.evaluator._evaluate import evaluate  # noqa: E402


def candidate(problem: Problem, key: str) -> tuple[str | None, str]:
    """The generator's source for variant ``key`` and the kernel kinds it launches (or why there is none)."""
    try:
        _, plan = _plan(problem, {}, None)
        variant = next((v for v in variant_menu(plan) if v.key == key), None)
        if variant is None:
            return None, f"no variant {key}"
        traced, vplan = _plan(problem, variant.options, None)
        source = emit_module(problem.name, problem.source, traced, vplan, variant.overrides, f"{key} ({variant.why})")
    except Exception as exc:  # a problem the generator cannot write: a row saying why
        return None, f"{type(exc).__name__}: {exc}"[:200]
    kinds = sorted({g.kind for g in vplan.groups if g.kind != "torch"})
    torch_ops = sorted(set(vplan.torch_ops))
    return source, "+".join(kinds) + (f" (torch: {','.join(torch_ops)})" if torch_ops else "")


def measure(path: Path, key: str, trials: int, device: str = "cuda") -> dict[str, Any]:
    cpu = device == "cpu"
    problem = Problem.from_file(path)
    row: dict[str, Any] = {"problem": path.stem, "variant": key}
    if cpu:  # the kernels are written for the shapes they run at: scale first, then generate
        try:
            problem = _scaled(problem)
        except Exception as exc:  # no scaling keeps the reference valid: say so
            return {**row, "kernels": "", "status": "not_scaled", "message": str(exc)[:160]}
        row["scaling"] = problem.scaling_note
    source, kinds = candidate(problem, key)
    row["kernels"] = kinds
    if source is None:
        return {**row, "status": "no_code"}
    if "torch:" in kinds:
        return {**row, "status": "not_triton"}
    start = time.perf_counter()
    result = evaluate(problem, source, device=device, trials=trials, timeout_s=900 if cpu else 120,
                      benchmark=not cpu)
    row.update(status=result.status.value, message=result.message[:160], wall_s=round(time.perf_counter() - start, 1))
    if result.error:  # a crash's traceback / the worker's last stderr lines: what to fix
        row["error"] = result.error[-2000:]
    if result.checks and result.checks.notes:
        row["notes"] = list(result.checks.notes)
    b = result.benchmark
    if b is not None:
        row.update(triton_ms=b.candidate.median_ms, cudnn_ms=b.eager.median_ms,
                   compile_ms=b.compiled.median_ms if b.compiled else None,
                   vs_cudnn=round(b.speedup_vs_eager, 3),
                   vs_compile=round(b.speedup_vs_compile, 3) if b.speedup_vs_compile else None)
    return row


def _scaled(problem: Problem) -> Problem:
    """The evaluator's CPU scaling; where its bounds cannot be met (3-D transposed convolutions whose spatial
    sizes are written into ``get_inputs``), 16x larger bounds: slower on the interpreter, still minutes."""
    try:
        return problem.scaled()
    except Exception:  # ProblemError: retry with room for the sizes the constants cannot shrink below
        return problem.scaled(max_elements=1 << 20, max_flops=1 << 30)


def table(rows: list[dict[str, Any]]) -> str:
    def ms(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else ""

    lines = ["| problem | variant | kernels | status | Triton ms | cuDNN (eager) ms | torch.compile ms | vs cuDNN | vs compile |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['problem'][:60]} | {r['variant']} | {r['kernels'][:40]} | {r['status']} | {ms(r.get('triton_ms'))} "
                     f"| {ms(r.get('cudnn_ms'))} | {ms(r.get('compile_ms'))} | {r.get('vs_cudnn') or ''} "
                     f"| {r.get('vs_compile') or ''} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--variants", nargs="+", default=["default"])
    ap.add_argument("--only", nargs="+", help="problem number prefixes (e.g. 56 63)")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: correctness on the Triton interpreter at scaled-down shapes, no timing")
    args = ap.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("conv_triton_gpu: needs a CUDA GPU", file=sys.stderr)
        return 2
    paths = sorted((args.kernelbench / "level1").glob("*conv*.py"), key=lambda p: int(p.stem.split("_")[0]))
    if args.only:
        paths = [p for p in paths if p.stem.split("_")[0] in args.only]
    rows = []
    for path in paths:
        for key in args.variants:
            row = measure(path, key, args.trials, args.device)
            rows.append(row)
            times = (f"triton {row['triton_ms']:8.3f} ms  cudnn {row['cudnn_ms']:8.3f} ms  "
                     f"compile {row.get('compile_ms') or float('nan'):8.3f} ms  " if "triton_ms" in row else "")
            print(f"{row['problem'][:50]:<50} {key:<12} {row['status']:<14} {times}"
                  f"{row['kernels']}: {row.get('message', '')[:80]}", flush=True)
            if args.json:  # after every row: a run cut short by its time limit keeps what it measured
                args.json.write_text(json.dumps(_summary(rows), indent=1))
    print(table(rows))
    return 0


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    import torch

    return {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "command": " ".join(sys.argv),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu (Triton interpreter, scaled)",
            "rows": rows}


if __name__ == "__main__":
    raise SystemExit(main())
