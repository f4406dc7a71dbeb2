"""GPU check of the profiler on 6 KernelBench problems (memory- and compute-bound).

For each problem: profile the eager reference, torch.compile and a simple Triton candidate from
benchmarks/candidates/ with ``profile_kernel(..., device="cuda", ncu=True, compiled=True)``, then
check that

* the % of speed of light is consistent with the measured times (floor / median time, and never far
  above 100%, since the floor is a lower bound on any implementation's time);
* our achieved DRAM bandwidth for the candidate agrees with ncu's DRAM throughput of its top kernel
  (both as % of the datasheet peak) when one kernel does all the work;
* ncu metrics are present;
* ahead-of-time compile facts (meta device, sm_90, no GPU involved) match what the GPU's JIT built
  (registers, shared memory, warps, stages);
* one full profile costs <= 30 s (reported with and without the torch.compile stage).

Usage (from the repository root; about 3 minutes on an H200, stops starting new problems at 165 s):

    OUT=/tmp/out python benchmarks/profiler_gpu.py /path/to/kernelbench-dev [--only relu,bmm]

Writes $OUT/profiler_gpu.json (summary rows), $OUT/reports/<name>.json (full reports),
$OUT/profiler_gpu.md (table) and prints the table last.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from tritonsmith.profiler._sol import datasheet_ceilings  # noqa: E402
from tritonsmith.profiler.profile import ProfileReport, profile_kernel  # noqa: E402

CASES = [  # (short name, problem file, candidate file, expected bound)
    ("relu", "level1/19_ReLU.py", "relu.py", "memory"),
    ("bmm", "level1/3_Batched_matrix_multiplication.py", "bmm.py", "compute"),
    ("softmax", "level1/23_Softmax.py", "softmax.py", "memory"),
    ("gemm_relu_div", "level2/63_Gemm_ReLU_Divide.py", "gemm_relu_divide.py", "compute"),
    ("rmsnorm", "level1/36_RMSNorm_.py", "rmsnorm.py", "memory"),
    ("matmul_irregular", "level1/8_Matmul_with_irregular_shapes_.py", "matmul_irregular.py", "compute"),
]
BUDGET_S = 165.0
SOL_SLACK = 1.05  # a time may beat the floor by measurement noise only


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernelbench", type=Path)
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--no-aot-check", action="store_true")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    (out / "reports").mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        handlers=[logging.FileHandler(out / "profiler_gpu.log"), logging.StreamHandler()])
    os.environ.setdefault("TRITONSMITH_CACHE_DIR", str(out / "cache"))
    wanted = {s for s in args.only.split(",") if s}
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for name, problem, candidate, expected in CASES:
        if wanted and name not in wanted:
            continue
        if time.perf_counter() - started > BUDGET_S:
            rows.append({"case": name, "skipped": f"time budget of {BUDGET_S:.0f} s used up"})
            continue
        path = args.kernelbench / problem
        if not path.is_file():
            rows.append({"case": name, "skipped": f"{path} not found"})
            continue
        rows.append(run_case(name, path, REPO / "benchmarks" / "candidates" / candidate, expected, out,
                             aot_check=not args.no_aot_check))
        (out / "profiler_gpu.json").write_text(json.dumps(rows, indent=1))
    table = render(rows, time.perf_counter() - started)
    (out / "profiler_gpu.md").write_text(table)
    print(table)
    return 0


def run_case(name: str, problem: Path, candidate: Path, expected: str, out: Path, *, aot_check: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    report = profile_kernel(problem, candidate, device="cuda", ncu=True, compiled=True, timeout_s=150)
    wall = time.perf_counter() - t0
    (out / "reports" / f"{name}.json").write_text(json.dumps(report.to_dict(), indent=1))
    (out / "reports" / f"{name}.txt").write_text(report.feedback(limit=8000))
    row: dict[str, Any] = {"case": name, "status": report.status.value, "message": report.message[:300],
                           "wall_s": round(wall, 1), "stages_s": report.stages_s,
                           "compile_stage_s": report.stages_s.get("torch.compile", 0.0),
                           "bound": report.sol.bound if report.sol else None, "expected_bound": expected,
                           "floor_ms": report.sol.floor_ms if report.sol else None,
                           "ceilings": report.ceilings.source if report.ceilings else None,
                           "bandwidth_gbs": report.ceilings.bandwidth_gbs if report.ceilings else None,
                           "check": report.candidate_check, "summary": report.summary}
    row["wall_without_compile_s"] = round(wall - row["compile_stage_s"], 1)
    for impl in report.impls:
        row[f"{impl.label}_ms"] = round(impl.timing.median_ms, 4)
        row[f"{impl.label}_pct_sol"] = round(impl.percent_of_sol, 1) if impl.percent_of_sol is not None else None
        recomputed = 100 * report.sol.floor_ms / impl.timing.median_ms if report.sol else None
        row[f"{impl.label}_pct_consistent"] = (recomputed is not None and impl.percent_of_sol is not None
                                               and abs(recomputed - impl.percent_of_sol) < 1e-6
                                               and impl.percent_of_sol <= 100 * SOL_SLACK)
    row.update(ncu_fields(report))
    if aot_check:
        row.update(aot_vs_jit(problem, candidate, report))
    return row


def ncu_fields(report: ProfileReport) -> dict[str, Any]:
    ncu = report.ncu
    if ncu is None:
        return {"ncu": "not run"}
    fields: dict[str, Any] = {"ncu": ncu.status, "ncu_note": ncu.note, "ncu_s": round(ncu.wall_s, 1),
                              "ncu_kernels": ncu.total_kernels}
    if not ncu.kernels:
        return fields
    top = ncu.kernels[0]
    fields.update(ncu_top=top.name[:60], ncu_dram_pct=top.dram_pct, ncu_compute_pct=top.compute_pct,
                  ncu_occupancy_pct=top.achieved_occupancy_pct, ncu_l2_hit_pct=top.l2_hit_pct,
                  ncu_registers=top.registers, ncu_dram_bytes=top.dram_bytes)
    cand = report.impl("candidate")
    peak = datasheet_ceilings(report.device_name)
    if cand and peak and top.duration_us and report.work and ncu.total_kernels == 1 and report.sol.bound == "memory":
        # same kernel, two estimates of DRAM use as % of the datasheet peak
        ours = 100 * cand.achieved_gbs / peak.bandwidth_gbs
        ncu_equiv = (top.dram_pct or 0.0) * (report.work.min_bytes / top.dram_bytes if top.dram_bytes else 1.0)
        fields.update(our_dram_pct_of_peak=round(ours, 1), ncu_dram_pct_min_bytes=round(ncu_equiv, 1),
                      ncu_time_vs_timing=round(top.duration_us / 1e3 / cand.timing.median_ms, 3))
    return fields


def aot_vs_jit(problem: Path, candidate: Path, gpu: ProfileReport) -> dict[str, Any]:
    t0 = time.perf_counter()
    cpu = profile_kernel(problem, candidate, device="cpu", target_gpu=gpu.device_name)
    pairs = []
    for jit in gpu.compile_facts:
        aot = next((f for f in cpu.compile_facts if f.kernel == jit.kernel), None)
        if aot is None:
            pairs.append({"kernel": jit.kernel, "aot": "missing"})
            continue
        keys = ("registers", "spills", "shared_bytes", "num_warps", "num_stages", "grid")
        pairs.append({"kernel": jit.kernel, **{k: [getattr(jit, k), getattr(aot, k)] for k in keys},
                      "match": all(getattr(jit, k) == getattr(aot, k) for k in keys)})
    return {"aot_s": round(time.perf_counter() - t0, 1), "aot_vs_jit": pairs,
            "aot_match": bool(pairs) and all(p.get("match") for p in pairs)}


def render(rows: list[dict[str, Any]], total_s: float) -> str:
    head = ("| case | bound (expected) | floor ms | eager ms (%SOL) | compile ms (%SOL) | candidate ms (%SOL) | "
            "%SOL ok | ncu DRAM% / compute% / occ% | AOT=JIT | profile s (w/o compile) |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['case']} | skipped: {r['skipped']} |" + " |" * 8)
            continue

        def cell(label: str) -> str:
            ms = r.get(f"{label}_ms")
            return f"{ms:.3f} ({r.get(f'{label}_pct_sol')}%)" if ms is not None else "-"

        ok = all(r.get(f"{lab}_pct_consistent", True) for lab in ("reference", "compiled", "candidate"))
        ncu = (f"{_f(r.get('ncu_dram_pct'))} / {_f(r.get('ncu_compute_pct'))} / {_f(r.get('ncu_occupancy_pct'))}"
               if r.get("ncu") == "ok" else f"{r.get('ncu')}")
        floor = f"{r['floor_ms']:.3f}" if r.get("floor_ms") else "-"
        lines.append(f"| {r['case']} | {r['bound']} ({r['expected_bound']}) | {floor} | {cell('reference')} | "
                     f"{cell('compiled')} | {cell('candidate')} | {ok} | {ncu} | {r.get('aot_match', '-')} | "
                     f"{r['wall_s']} ({r['wall_without_compile_s']}) |")
    lines.append(f"\ntotal {total_s:.0f} s; ceilings: {next((r.get('ceilings') for r in rows if r.get('ceilings')), '-')}")
    return "\n".join(lines) + "\n"


def _f(v: Any) -> str:
    return f"{v:.0f}" if isinstance(v, (int, float)) else "?"


if __name__ == "__main__":
    sys.exit(main())
