"""Does a channels-last convolution make the hybrid (torch conv + Triton epilogue) candidates faster?

TorchInductor converts convolutions to channels-last (its layout optimization) before cuDNN runs them; the
built-in generator's hybrid candidates call the convolution as the reference does (NCHW). For the first
convolution of each given KernelBench problem this times, on the GPU (CUDA events, median of 50 calls):
the convolution in NCHW, in channels-last (weights converted once, the input converted per call, and
without that conversion; channels-last weights with the NCHW input as given, which lets PyTorch pick the
layout; and NCHW with `cudnn.benchmark` on), the whole reference eager and under torch.compile; and the
normwise error of each layout against float64.

    python3 benchmarks/conv_layout_gpu.py PROBLEM.py [PROBLEM.py ...]
"""

from __future__ import annotations

import copy
import importlib.util
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn

CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def load(path: Path):  # noqa: ANN201
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(fn: Callable[[], object], reps: int = 50) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def rel(x: torch.Tensor, exact: torch.Tensor) -> float:
    return float((x.double() - exact).norm() / exact.norm())


def main() -> None:
    print(f"{'problem':<48} {'nchw ms':>8} {'cl ms':>7} {'cl+cvt':>7} {'eager':>7} {'compile':>8} "
          f"{'err nchw':>9} {'err cl':>9} {'w-cl':>7} {'bench':>7}  w-cl output")
    for name in sys.argv[1:]:
        mod = load(Path(name))
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs()).cuda().eval()
        inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in mod.get_inputs()]
        conv = next(m for m in model.modules() if isinstance(m, CONVS))
        x = inputs[0]
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
        if fmt is None:
            print(f"{Path(name).stem:<48} (1-D convolution: no channels-last format)")
            continue
        conv_cl = type(conv).__new__(type(conv))
        conv_cl.__dict__.update(conv.__dict__)
        conv_cl._parameters = {k: (nn.Parameter(v.detach().to(memory_format=fmt)) if v is not None and v.dim() == x.dim()
                                   else v) for k, v in conv._parameters.items()}
        x_cl = x.contiguous(memory_format=fmt)
        with torch.no_grad():
            t_nchw = bench(lambda: conv(x))
            t_cl = bench(lambda: conv_cl(x_cl))
            t_cvt = bench(lambda: conv_cl(x.contiguous(memory_format=fmt)))
            t_eager = bench(lambda: model(*inputs))
            compiled = torch.compile(model)
            t_comp = bench(lambda: compiled(*inputs))
            t_wcl = bench(lambda: conv_cl(x))
            wcl_out = "channels-last" if conv_cl(x).is_contiguous(memory_format=fmt) else "nchw"
            torch.backends.cudnn.benchmark = True
            t_bench = bench(lambda: conv(x))
            torch.backends.cudnn.benchmark = False
            exact = copy.deepcopy(conv).double()(x.double())
            e_nchw, e_cl = rel(conv(x), exact), rel(conv_cl(x_cl), exact)
        print(f"{Path(name).stem[:48]:<48} {t_nchw:>8.3f} {t_cl:>7.3f} {t_cvt:>7.3f} {t_eager:>7.3f} {t_comp:>8.3f} "
              f"{e_nchw:>9.2e} {e_cl:>9.2e} {t_wcl:>7.3f} {t_bench:>7.3f}  {wcl_out}", flush=True)


if __name__ == "__main__":
    main()
