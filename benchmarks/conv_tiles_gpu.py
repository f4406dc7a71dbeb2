"""Tile sweep of the built-in generator's implicit-GEMM convolutions (issue 19): which tiles, warps and stages
each level-1 convolution of a KernelBench directory runs fastest with.

    python benchmarks/conv_tiles_gpu.py KBDIR --aot [--only 56] [--layout nhwc] [--json AOT.json]  # no GPU needed
    python benchmarks/conv_tiles_gpu.py KBDIR [--only 56 62 65 78] [--from-aot AOT.json] [--json OUT.json] \
        [--jobs 12] [--limit 40]
    python benchmarks/conv_tiles_gpu.py KBDIR --kind matmul --only 6 7 [...]   # level 1's matmuls instead
    python benchmarks/conv_tiles_gpu.py KBDIR --prior EARLIER.json --limit 12 [...]  # the 12 best-known first

With ``--kind matmul`` the same sweep runs over the matmul group of level 1's matmul problems (tiles, ``GROUP_M``
kept, tf32x3 kept); the baseline is then PyTorch's float32 matmul (TF32 off: PyTorch's default for matmuls).

Per problem, the generator's first candidate is written once per configuration of the grid (the configuration as
the convolution group's override: ``BLOCK_M`` x ``BLOCK_N`` x ``BLOCK_K``, ``num_warps``, ``num_stages``; the
precision stays tf32x3). On the GPU, ``--jobs`` processes compile them first (they warm Triton's cache; a
configuration that spills more than 8 registers or fails is dropped there), then one process checks each
against the reference (one call on fresh random inputs, cuDNN's TF32 off for the reference, allclose 1e-4)
and times it with ``triton.testing.do_bench`` (median ms), with cuDNN (PyTorch's default TF32, as
torch.compile calls it) timed alongside. Prints each problem's configurations fastest first, and writes
the rows as JSON after every problem. ``--aot`` compiles every configuration for sm_90 ahead of time on
the CPU and reports registers and spills only: no timing exists there.

This is a tuning sweep, not the evaluator: the chosen configurations go into ``_variants._conv_config`` (or a
variant) and are then verified and timed by the suite (``tritonsmith bench``), which alone reports speedups.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import itertools
import json
import math
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from builtin_aot import compile_candidate  # noqa: E402
from tritonsmith.agents.builtin import _plan  # noqa: E402
from tritonsmith.agents.builtin._convgemm import nhwc_ok  # noqa: E402
from tritonsmith.agents.builtin._emit import emit_module  # noqa: E402
from tritonsmith.agents.builtin._kernelbase import next_pow2  # noqa: E402
from tritonsmith.agents.builtin._partition import CONVS, MATMUL  # noqa: E402
from tritonsmith.core.problem import Problem  # noqa: E402

SPILL_BOUND = 8  # registers: the AOT tests' bound


def grid(cout_g: int) -> list[dict[str, Any]]:
    """The configurations tried: columns no wider than the group's output channels (at least 16, a dot's
    minimum), at most 256 x 128 outputs per tile."""
    widest = max(16, min(128, next_pow2(cout_g)))
    out = []
    for bm, bn, bk, (warps, stages) in itertools.product((64, 128, 256), (16, 32, 64, 128), (16, 32, 64),
                                                          ((4, 3), (8, 3), (4, 4), (8, 4))):
        if bn <= widest and bm * bn <= 256 * 64 and not (bn == 16 and widest > 16):
            out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages})
    return out


def grid_mm() -> list[dict[str, Any]]:
    """The matmul configurations tried: 64-256 square-ish tiles up to 256 x 128 outputs, K steps of 16-64."""
    out = []
    for bm, bn, bk, (warps, stages) in itertools.product((64, 128, 256), (64, 128, 256), (16, 32, 64),
                                                          ((4, 3), (8, 3), (8, 4), (8, 2))):
        if bm * bn <= 256 * 128:
            out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages})
    return out


def prior_order(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Configuration label -> how far from each problem's fastest it ran in an earlier sweep (the geometric mean
    of ms / fastest ms over the problems that timed it correctly; lower first). Labels carry the layout."""
    timed: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.get("status") == "correct" and r.get("ms"):
            timed.setdefault(r["problem"], {})[r["config"]] = float(r["ms"])
    logs: dict[str, list[float]] = {}
    for by_cfg in timed.values():
        best = min(by_cfg.values())
        for cfg, ms in by_cfg.items():
            logs.setdefault(cfg, []).append(math.log(ms / best))
    return {cfg: math.exp(sum(v) / len(v)) for cfg, v in logs.items()}


def label(cfg: dict[str, Any]) -> str:
    tag = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} w{cfg['num_warps']} s{cfg['num_stages']}"
    return tag + (" nhwc" if cfg.get("layout") == "nhwc" else "")


def sources(path: Path, limit: int | None, skip: set[tuple[str, str]] = frozenset(), layout: str = "nchw",
            kind: str = "conv", prior: dict[str, float] | None = None) -> tuple[Problem, list[tuple[dict[str, Any], str]]]:
    """The problem and its candidate's source per configuration: the grid less ``skip`` ((problem, config) pairs
    that spilled or failed ahead of time), ordered by ``prior`` (``prior_order``: the best-known first, unknown ones
    after them in grid order), the first ``limit`` of it."""
    problem = Problem.from_file(path)
    traced, plan = _plan(problem, {}, None)
    key = MATMUL if kind == "matmul" else CONVS
    g = next(g for g in plan.groups if g.kind == key)  # StopIteration: no Triton convolution or matmul in the plan
    if kind == "matmul":
        cfgs = [c for c in grid_mm() if (path.stem, label(c)) not in skip]
    else:
        n = g.nodes[0]
        cfgs = grid(n.shape[1] // int(n.attrs["groups"]))
        if layout == "nhwc":  # the channels-last form (``conv-nhwc``) where the convolution allows it
            cfgs = [{**c, "layout": "nhwc"} for c in cfgs] if nhwc_ok(plan, n) else []
        # skipped by label after the layout is set: an --aot run of the channels-last form labels them " nhwc"
        cfgs = [c for c in cfgs if (path.stem, label(c)) not in skip]
    return problem, [(c, emit_module(problem.name, problem.source, traced, plan, {key: c}, f"sweep {label(c)}"))
                     for c in _ordered(cfgs, prior)[:limit]]


def _ordered(cfgs: list[dict[str, Any]], prior: dict[str, float] | None) -> list[dict[str, Any]]:
    if not prior:
        return cfgs
    return sorted(cfgs, key=lambda c: prior.get(label(c), math.inf))  # stable: unknown ones keep grid order


def _load(src: str, tag: str) -> Any:
    path = Path(tempfile.mkdtemp(prefix="conv_tiles_")) / f"cand_{tag}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _aot(src: str) -> dict[str, Any]:
    """Registers and spills (the largest over the kernels it launches) of a candidate compiled for sm_90."""
    path = Path(tempfile.mkdtemp(prefix="conv_tiles_")) / "cand_aot.py"
    path.write_text(src)
    rows = compile_candidate(path, 90, shared_stores=False)
    error = next((r["error"] for r in rows if r["error"]), None)
    if error:
        return {"spills": 0, "registers": 0, "error": str(error)[:200]}
    return {"spills": max(r["spills"] or 0 for r in rows), "registers": max(r["registers"] or 0 for r in rows),
            "error": None}


def _warm(job: tuple[str, str]) -> tuple[bool, str]:
    """Compile (and run once) one candidate on the GPU; its kernels land in Triton's cache."""
    problem_path, src = job
    try:
        _run_once(Problem.from_file(Path(problem_path)), _load(src, "warm"))
        return True, ""
    except Exception as exc:  # a configuration that cannot compile or launch: dropped, with why
        return False, f"{type(exc).__name__}: {exc}"[:200]


def _run_once(problem: Problem, mod: Any) -> tuple[Any, Any, list[Any]]:
    import torch

    from tritonsmith.core.problem_meta import exec_reference

    ref = exec_reference(problem.source, problem.name)
    init = ref.get_init_inputs()
    torch.manual_seed(0)
    model = ref.Model(*init).cuda()
    torch.manual_seed(0)
    cand = mod.ModelNew(*init).cuda()
    torch.manual_seed(1234)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    with torch.no_grad():
        cand(*inputs)
    torch.cuda.synchronize()
    return model, cand, inputs


def measure(path: Path, jobs: int, limit: int | None, skip: set[tuple[str, str]],
            rows: list[dict[str, Any]], save: Any, layout: str = "nchw", kind: str = "conv",
            prior: dict[str, float] | None = None) -> None:
    """Compile every configuration in ``jobs`` processes, then check and time each; rows are appended to ``rows``
    and ``save()`` is called after each (a run stopped by its time limit keeps what it measured)."""
    import torch
    from triton.testing import do_bench

    problem, cands = sources(path, limit, skip, layout, kind, prior)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=__import__("multiprocessing").get_context("spawn")) as ex:
        warmed = list(ex.map(_warm, [(str(path), s) for _, s in cands]))
    cudnn_ms = None
    for (cfg, src), (ok, why) in zip(cands, warmed, strict=True):
        row: dict[str, Any] = {"problem": path.stem, "config": label(cfg), **cfg}
        if not ok:
            rows.append({**row, "status": "failed", "message": why})
            save()
            continue
        model, cand, inputs = _run_once(problem, _load(src, "time"))
        with torch.no_grad():
            torch.backends.cudnn.allow_tf32 = False  # the reference at fp32 accuracy, as the evaluator holds it
            want = model(*inputs)
            torch.backends.cudnn.allow_tf32 = True  # PyTorch's default: how eager and torch.compile run it
            got = cand(*inputs)
            correct = bool(torch.allclose(got, want, atol=1e-4, rtol=1e-4))
            row["max_abs_err"] = float((got - want).abs().max())
            row["ms"] = do_bench(lambda: cand(*inputs), warmup=10, rep=60, return_mode="median")
            if cudnn_ms is None:
                cudnn_ms = do_bench(lambda: model(*inputs), warmup=10, rep=60, return_mode="median")
        rows.append({**row, "status": "correct" if correct else "wrong", "cudnn_ms": cudnn_ms,
                     "vs_cudnn": round(cudnn_ms / row["ms"], 3)})
        save()
        print(f"{path.stem[:40]:<40} {label(cfg):<22} {rows[-1]['status']:<8} {row['ms']:9.3f} ms  "
              f"torch {cudnn_ms:8.3f} ms  {rows[-1]['vs_cudnn']:.3f}x", flush=True)


def table(rows: list[dict[str, Any]]) -> str:
    """Per problem, its configurations fastest first (correct ones only are ranked)."""
    lines = ["| problem | config | status | ms | cuDNN ms | vs cuDNN | regs | spills |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["problem"], r.get("status") != "correct", r.get("ms") or 1e9)):
        ms = f"{r['ms']:.3f}" if "ms" in r else ""
        cu = f"{r['cudnn_ms']:.3f}" if r.get("cudnn_ms") else ""
        lines.append(f"| {r['problem'][:45]} | {r['config']} | {r['status']} | {ms} | {cu} | {r.get('vs_cudnn', '')} "
                     f"| {r.get('registers', '')} | {r.get('spills', '')} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("--only", nargs="+", help="problem numbers (e.g. 56 62)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--jobs", type=int, default=8, help="GPU: processes compiling the configurations first")
    ap.add_argument("--limit", type=int, help="the first N configurations of the grid only")
    ap.add_argument("--aot", action="store_true", help="no GPU: sm_90 registers/spills per configuration")
    ap.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw",
                    help="nhwc: the channels-last form (conv-nhwc) of the convolutions that allow it")
    ap.add_argument("--kind", choices=["conv", "matmul"], default="conv", help="which group's tiles to sweep")
    ap.add_argument("--from-aot", type=Path, help="an --aot run's JSON: skip the configurations that spilled there")
    ap.add_argument("--prior", type=Path, help="an earlier GPU sweep's JSON: its fastest configurations first "
                    "(with --limit, only the best-known N per problem)")
    args = ap.parse_args()
    skip: set[tuple[str, str]] = set()
    if args.from_aot:
        skip = {(r["problem"], r["config"]) for r in json.loads(args.from_aot.read_text())["rows"] if r["status"] != "ok"}
    pattern = "*conv*.py" if args.kind == "conv" else "*atmul*.py"
    prior = prior_order(json.loads(args.prior.read_text())["rows"]) if args.prior else None
    paths = sorted((args.kernelbench / "level1").glob(pattern), key=lambda p: int(p.stem.split("_")[0]))
    paths = [p for p in paths if not args.only or p.stem.split("_")[0] in args.only]
    rows: list[dict[str, Any]] = []

    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps(_summary(rows, args.aot), indent=1))

    for path in paths:
        try:
            if args.aot:
                _, cands = sources(path, args.limit, layout=args.layout, kind=args.kind, prior=prior)
                for cfg, src in cands:
                    facts = _aot(src)
                    status = "error" if facts["error"] else ("spills" if facts["spills"] > SPILL_BOUND else "ok")
                    rows.append({"problem": path.stem, "config": label(cfg), **cfg, **facts, "status": status})
                    print(f"{path.stem[:40]:<40} {label(cfg):<22} {status:<7} regs {facts['registers']:>3} "
                          f"spills {facts['spills']:>4} {facts['error'] or ''}", flush=True)
            else:
                measure(path, args.jobs, args.limit, skip, rows, save, args.layout, args.kind, prior)
        except KeyboardInterrupt:
            print("conv_tiles_gpu: stopped; the rows so far are kept", file=sys.stderr)
            break
        except StopIteration:  # no Triton convolution (a depthwise window) or matmul in this problem's plan
            print(f"{path.stem}: no Triton {args.kind} group in its plan, skipped", flush=True)
        save()
    print(table(rows))
    return 0


def _summary(rows: list[dict[str, Any]], aot: bool) -> dict[str, Any]:
    import torch

    device = "sm_90 ahead of time (no GPU)" if aot else torch.cuda.get_device_name(0)
    return {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "command": " ".join(sys.argv),
            "device": device, "rows": rows}


if __name__ == "__main__":
    raise SystemExit(main())
