"""Evaluate every seed kernel of the memory's seed library on the GPU, through the evaluator.

Run from the repository root on a CUDA machine (no chromadb or langgraph needed):

    OUT=/some/dir python benchmarks/seed_library_gpu.py            # all seeds, ~2-3 minutes on an H200
    OUT=/some/dir python benchmarks/seed_library_gpu.py softmax     # some seeds only
    ... --budget-s 170     # start no new seed after 170 s (default); the rest are listed as not run
    ... --merge earlier/manifest.json names...   # continue a partial run, keeping its figures

Writes into $OUT (default: the current directory):
- ``seed_library_gpu.json``: every seed's full EvalResult (status, timings, speedups, versions);
- ``manifest.json``: a copy of src/tritonsmith/memory/seeds/manifest.json whose ``h200`` entries hold the
  measured figures of the seeds found correct (others keep "not measured"); copy it over the packaged one;
- ``seed_library_gpu.log``.
Results are written after every seed, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tritonsmith.core.problem import Problem  # noqa: E402
from tritonsmith.evaluator._evaluate import evaluate  # noqa: E402

SEED_DIR = ROOT / "src" / "tritonsmith" / "memory" / "seeds"
log = logging.getLogger("seed_library_gpu")


def _measured(result: dict, versions: dict, device_name: str, when: str) -> dict:
    bench = result["benchmark"]
    return {
        "speedup_vs_eager": round(bench["eager"]["median_ms"] / bench["candidate"]["median_ms"], 3),
        "speedup_vs_compile": (round(bench["compiled"]["median_ms"] / bench["candidate"]["median_ms"], 3)
                               if bench.get("compiled") else None),
        "runtime_ms": bench["candidate"]["median_ms"], "eager_ms": bench["eager"]["median_ms"],
        "compile_ms": bench["compiled"]["median_ms"] if bench.get("compiled") else None,
        "compile_mode": bench.get("compile_mode"), "device_name": device_name,
        "torch": versions.get("torch"), "triton": versions.get("triton"), "measured_at": when,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="seed names (default: all)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds per seed")
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run through the interpreter (no timings)")
    parser.add_argument("--budget-s", type=float, default=170.0, help="start no new seed after this many seconds")
    parser.add_argument("--merge", type=Path, help="a manifest.json from an earlier partial run: keep its figures")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        handlers=[logging.FileHandler(out / "seed_library_gpu.log"), logging.StreamHandler()])
    manifest = json.loads((SEED_DIR / "manifest.json").read_text())
    if args.merge:
        earlier = {e["name"]: e["h200"] for e in json.loads(args.merge.read_text())["seeds"]}
        for entry in manifest["seeds"]:
            entry["h200"] = earlier.get(entry["name"], entry["h200"])
    start = time.perf_counter()
    skipped = []
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    results: dict[str, dict] = {}
    rows = []
    for entry in manifest["seeds"]:
        if args.names and entry["name"] not in args.names:
            continue
        if time.perf_counter() - start > args.budget_s:
            skipped.append(entry["name"])
            continue
        t0 = time.perf_counter()
        problem = Problem.from_file(SEED_DIR / entry["problem"])
        res = evaluate(problem, SEED_DIR / entry["kernel"], device=args.device, trials=args.trials,
                       scale=args.device == "cpu",
                       tolerance=entry.get("tolerance", "kernelbench"), benchmark=True,
                       compile_mode=args.compile_mode, timeout_s=args.timeout)
        data = res.to_dict()
        results[entry["name"]] = data
        if res.ok and res.benchmark is not None:
            entry["h200"] = _measured(data, res.versions, res.device_name, when)
        log.info("%s: %s in %.1fs %s", entry["name"], res.status.value, time.perf_counter() - t0,
                 "" if res.ok else (res.message + " " + (res.error or ""))[-800:])
        rows.append((entry["name"], res.status.value, res.speedup_vs_eager, res.speedup_vs_compile,
                     res.benchmark.candidate.median_ms if res.benchmark else None))
        (out / "seed_library_gpu.json").write_text(json.dumps(
            {"measured_at": when, "device_name": res.device_name, "versions": res.versions, "results": results},
            indent=2))
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"\n{'seed':<20} {'status':<14} {'vs eager':>9} {'vs compile':>11} {'ms':>9}")
    for name, status, se, sc, ms in rows:
        fmt = lambda v, s="x": f"{v:.2f}{s}" if v is not None else "-"  # noqa: E731
        print(f"{name:<20} {status:<14} {fmt(se):>9} {fmt(sc):>11} {fmt(ms, ''):>9}")
    if skipped:
        print(f"not run (time budget): {' '.join(skipped)}; run them with --merge $OUT/manifest.json")
    return 0 if all(r[1] == "correct" for r in rows) and not skipped else 1


if __name__ == "__main__":
    raise SystemExit(main())
