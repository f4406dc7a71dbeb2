"""Where a network's device time goes: eager, torch.compile and our candidate, kernel by kernel (GPU only).

For each ``PROBLEM.py=CANDIDATE.py`` pair this runs the three under ``torch.profiler`` (CUDA activity, 10 calls
after 5 warm-up calls, no grad) and prints, per forward call: the total device time, the time by kind of kernel
(convolution, GEMM, Triton, layout copies, other) and the largest kernels. It answers "which kernels make the
candidate slower than torch.compile" for the hybrid conv networks, where the evaluator only gives one number.

    python3 benchmarks/where_time_goes_gpu.py .kb/level3/19_MobileNetV1.py=A.py[,B.py ...] ...
    python3 benchmarks/where_time_goes_gpu.py --json out.json PAIR [PAIR ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tritonsmith.core.modload import import_file

CALLS = 10
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("layout", re.compile(r"nchwToNhwc|nhwcToNchw|copy|Memcpy|transpose|permute|contiguous", re.I)),
    ("conv", re.compile(r"conv|cudnn|implicit|dgrad|wgrad|fprop|winograd|xmma_fprop|nhwc|nchw", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|sm90_xmma|cublas|ampere_|sgemm|matmul", re.I)),
    ("triton", re.compile(r"^triton_|_kernel$|_kernel_", re.I)),
)


def kind(name: str) -> str:
    return next((k for k, rx in KINDS if rx.search(name)), "other")


def profile(fn: Callable[[], Any], device: str) -> dict[str, tuple[float, float]]:
    """Kernel name -> (device ms per call, launches per call) over CALLS calls (on the CPU: aten ops' self
    time, only to try the script without a GPU)."""
    cuda = device == "cuda"
    activity = torch.profiler.ProfilerActivity.CUDA if cuda else torch.profiler.ProfilerActivity.CPU
    with torch.no_grad():
        for _ in range(5):
            fn()
        if cuda:
            torch.cuda.synchronize()
        with torch.profiler.profile(activities=[activity]) as prof:
            for _ in range(CALLS):
                fn()
            if cuda:
                torch.cuda.synchronize()
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for e in prof.events():
        if cuda and e.device_type == torch.autograd.DeviceType.CUDA:
            acc[e.name][0] += e.device_time_total / 1000.0 / CALLS
            acc[e.name][1] += 1.0 / CALLS
        elif not cuda and e.name.startswith("aten::"):
            acc[e.name][0] += e.self_cpu_time_total / 1000.0 / CALLS
            acc[e.name][1] += 1.0 / CALLS
    return {k: (v[0], v[1]) for k, v in acc.items()}


def summary(kernels: dict[str, tuple[float, float]]) -> dict[str, Any]:
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for name, (ms, n) in kernels.items():
        by_kind[kind(name)][0] += ms
        by_kind[kind(name)][1] += n
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:12]
    return {"total_ms": sum(ms for ms, _ in kernels.values()), "launches": sum(n for _, n in kernels.values()),
            "by_kind": {k: {"ms": v[0], "launches": v[1]} for k, v in sorted(by_kind.items())},
            "top": [{"name": k[:110], "ms": ms, "launches": n} for k, (ms, n) in top]}


def label_of(path: Path) -> str:
    """``19_MobileNetV1__net-cl.py`` -> ``net-cl``; any other name -> its stem."""
    return path.stem.partition("__")[2] or path.stem


def one(pair: str, device: str) -> dict[str, Any]:
    ref_path, _, cands = pair.partition("=")
    ref = import_file(Path(ref_path), "_wtg_reference")
    torch.manual_seed(0)
    init = ref.get_init_inputs()
    torch.manual_seed(0)
    model = ref.Model(*init).to(device)
    torch.manual_seed(1)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    runs: list[tuple[str, Callable[[], Any]]] = [("eager", lambda: model(*inputs)),
                                                 ("compile", _bind(torch.compile(model), inputs))]
    runs += [(label_of(Path(c)), _candidate(Path(c), init, device, inputs)) for c in cands.split(",")]
    out: dict[str, Any] = {"problem": Path(ref_path).stem, "errors": {}}
    for label, fn in runs:
        try:  # one broken candidate must not lose the others' profiles (device time is scarce)
            out[label] = summary(profile(fn, device))
            out[label]["wall_ms"] = wall_ms(fn) if device == "cuda" else None
        except Exception as exc:  # noqa: BLE001
            out["errors"][label] = f"{type(exc).__name__}: {str(exc)[:300]}"
    out["labels"] = [lab for lab, _ in runs if lab in out]
    return out


def _candidate(path: Path, init: list[Any], device: str, inputs: list[Any]) -> Callable[[], Any]:
    """The candidate's forward on ``inputs``; a candidate that fails to load fails when called (and is reported)."""
    try:
        torch.manual_seed(0)
        model = import_file(path, f"_wtg_{path.stem}").ModelNew(*init).to(device)
    except Exception as exc:  # noqa: BLE001
        why = f"{path.name} did not load: {type(exc).__name__}: {exc}"

        def broken() -> Any:
            raise RuntimeError(why)

        return broken
    return _bind(model, inputs)


def _bind(m: Any, inputs: list[Any]) -> Callable[[], Any]:
    return lambda: m(*inputs)


def wall_ms(fn: Callable[[], Any], reps: int = 30) -> float:
    """Median CUDA-event time of one call (no profiler attached)."""
    times = []
    with torch.no_grad():
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def show(r: dict[str, Any]) -> None:
    print(f"\n## {r['problem']}")
    labels = r["labels"]
    kinds = sorted({k for lab in labels for k in r[lab]["by_kind"]})
    print("| | wall ms | kernel ms | launches | " + " | ".join(f"{k} ms (n)" for k in kinds) + " |")
    print("|---" * (4 + len(kinds)) + "|")
    for lab in labels:
        s = r[lab]
        cells = [f"{s['by_kind'][k]['ms']:.3f} ({s['by_kind'][k]['launches']:.0f})" if k in s["by_kind"] else "-"
                 for k in kinds]
        wall = f"{s['wall_ms']:.3f}" if s.get("wall_ms") is not None else "-"
        print(f"| {lab} | {wall} | {s['total_ms']:.3f} | {s['launches']:.0f} | " + " | ".join(cells) + " |")
    for lab, err in r.get("errors", {}).items():
        print(f"| {lab} | failed: {err} |")
    for lab in labels[1:]:
        print(f"\n{lab}, largest kernels (ms per call, launches per call):")
        for t in r[lab]["top"]:
            print(f"  {t['ms']:8.3f} {t['launches']:5.0f}  [{kind(t['name'])}] {t['name']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", nargs="+", help="PROBLEM.py=CANDIDATE.py[,CANDIDATE.py ...] (NAME__variant.py is labelled variant)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="cpu only tries the script (aten op CPU times, not kernels)")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("needs a CUDA GPU (--device cpu only tries the script)", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"device: {name}, torch {torch.__version__}, {CALLS} calls per profile")
    results = []
    for pair in args.pairs:
        try:
            results.append(one(pair, args.device))
            show(results[-1])
        except Exception as exc:  # noqa: BLE001 - one broken pair must not lose the others
            print(f"\n## {pair}: {type(exc).__name__}: {exc}")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
