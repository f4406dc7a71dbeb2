"""Time the row-reduction kernels of one launcher alone, kernel by kernel, with source variants (GPU only).

The where-time-goes profile of 2026-12-07 (H100) showed the split path's apply kernels of 19_MobileNetV1's
BatchNorms at ~0.14 ms a launch whatever their size (4-8M elements, ~1,000 programs), where the unsplit kernel
of the same data size took ~0.014 ms. This script times each kernel of a launcher alone (CUDA events, after
warm-up) and the same launcher under source variants, to find what costs the time.

    python3 benchmarks/row_kernels_gpu.py CAND.py:_row_0:10x32x112x112 [...] [--variants swapgrid,warps4,block1024]
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from tritonsmith.core.modload import import_file

def _times(n: int, group: int = 1) -> Any:
    """A regex replacement that multiplies the number in ``group`` by ``n``."""
    return lambda m: m.group(0)[:m.start(group) - m.start(0)] + str(int(m.group(group)) * n) + \
        m.group(0)[m.end(group) - m.start(0):]


# a split launcher's chunk count in its four places: the SPLIT meta, the workspace, CHUNK and the grid
_SPLIT = [(r"SPLIT=(\d+)", _times(1)), (r"ws = torch\.empty\(\(\d+, \d+, (\d+)\)", _times(1)),
          (r"CHUNK = triton\.cdiv\(triton\.cdiv\([^,]+, (\d+)\)", _times(1)),
          (r"_kernel\[\(triton\.cdiv\([^)]*\), (\d+)\)\]", _times(1))]


def _split(n: int) -> list[tuple[str, Any]]:
    return [(pattern, _times(n)) for pattern, _ in _SPLIT]


def _block(n: int) -> list[tuple[str, Any]]:
    """BLOCK_R 2048 -> n, in the meta and in CHUNK's rounding (CHUNK stays whole tiles)."""
    return [(r"BLOCK_R=2048", f"BLOCK_R={n}"), (r"(CHUNK = .*), 2048\) \* 2048", rf"\1, {n}) * {n}")]


VARIANTS: dict[str, list[tuple[str, Any]]] = {
    "as-is": [],
    "warps4": [(r"num_warps=8", "num_warps=4")],
    "block1024": [(r"BLOCK_R=2048", "BLOCK_R=1024")],
    # chunk index fastest: neighbouring programs read neighbouring chunks of one channel
    "swapgrid": [(r"tl\.program_id\(0\)", "tl.program_id(@1)"), (r"tl\.program_id\(1\)", "tl.program_id(0)"),
                 (r"tl\.program_id\(@1\)", "tl.program_id(1)"),
                 (r"(_kernel\[)\((triton\.cdiv\([^)]*\)), (\w+)\)\]", r"\1(\3, \2)]")],
    # more bytes in flight per program: a chunk in one 4096-wide tile (8 or 16 warps)
    "block4096": _block(4096),
    "block4096-w16": _block(4096) + [(r"num_warps=8", "num_warps=16")],
    # more programs: twice / four times the chunks (one 2048 tile, or one 1024 tile with 4 warps, each)
    "split2x": _split(2),
    "split4x-block1024-w4": _split(4) + _block(1024) + [(r"num_warps=8", "num_warps=4")],
}


def load(path: str, variant: str) -> Any:
    src = Path(path).read_text()
    for pattern, repl in VARIANTS[variant]:
        src = re.sub(pattern, repl, src)
    out = Path(tempfile.mkdtemp()) / f"{Path(path).stem}__{variant}.py"
    out.write_text(src)
    return import_file(str(out), f"rowk_{abs(hash((path, variant)))}")


def capture(fn: Any) -> list[tuple[Any, tuple[Any, ...], dict[str, Any], Any]]:
    """The Triton launches one call of ``fn`` makes (run for real)."""
    from triton.runtime import jit

    seen: list[tuple[Any, tuple[Any, ...], dict[str, Any], Any]] = []
    original = jit.JITFunction.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if not warmup:
            seen.append((self, args, kwargs, grid))
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    jit.JITFunction.run = run  # type: ignore[method-assign]
    try:
        fn()
    finally:
        jit.JITFunction.run = original  # type: ignore[method-assign]
    return seen


def time_ms(fn: Any, reps: int = 100) -> float:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def one(spec: str, variant: str, first: dict[str, torch.Tensor]) -> list[str]:
    """Time one launcher under one variant; its output is compared with the spec's first variant's (same inputs)."""
    path, launcher, shape = spec.split(":")
    dims = tuple(int(d) for d in shape.split("x"))
    mod = load(path, variant)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(*dims, device="cuda", generator=gen)
    fn = getattr(mod, launcher)
    # the launcher's other parameters are per-channel vectors (weights, biases) in the candidates timed here
    vectors = [torch.randn(dims[1], device="cuda", generator=gen) for _ in range(len(inspect.signature(fn).parameters) - 1)]
    call = lambda: fn(x, *vectors)  # noqa: E731
    out = call()
    torch.cuda.synchronize()
    diff = f"{(out - first[spec]).abs().max().item():.1e}" if spec in first else "(first)"
    first.setdefault(spec, out)
    mb = x.numel() * 4 / 1e6
    rows = [f"| {Path(path).stem[:24]} | {launcher} | {variant} | whole launcher | | {time_ms(call) * 1e3:.1f} | {mb:.0f} "
            f"| {diff} |"]
    for fn, args, kwargs, grid in capture(call):
        g = grid(kwargs) if callable(grid) else grid
        t = time_ms(lambda fn=fn, args=args, kwargs=kwargs, g=g: fn[g](*args, **kwargs))
        rows.append(f"| | | | {fn.__name__} | {tuple(g)} | {t * 1e3:.1f} | | |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", help="CANDIDATE.py:LAUNCHER:NxCxHxW (the launcher takes x, then per-channel vectors)")
    ap.add_argument("--variants", default="as-is,warps4,block1024,swapgrid")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; CUDA events, 100 launches after 10")
    print("| candidate | launcher | variant | kernel | grid | us | input MB | max diff vs first variant |\n"
          "|---|---|---|---|---|---|---|---|")
    first: dict[str, torch.Tensor] = {}
    for spec in args.specs:
        for variant in args.variants.split(","):
            try:
                print("\n".join(one(spec, variant, first)), flush=True)
            except Exception as exc:  # noqa: BLE001 - one failing variant must not lose the others
                print(f"| {spec} | | {variant} | {type(exc).__name__}: {str(exc)[:150]} | | | | |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
