"""How far a KernelBench reference's own float32 result is from its float64 one, at the problem's full size.

    python conditioning.py PROBLEM.py [--channels-last]

Seed 0 for the parameters and the inputs; prints the largest difference and how many elements lie outside
kernelbench's float32 tolerance (atol = rtol = 1e-4), and with --channels-last the same float32 model run
channels-last against the NCHW run (a different operation order, same precision).
"""
import importlib.util
import sys
import time

import torch

spec = importlib.util.spec_from_file_location("problem", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
torch.manual_seed(0)
model = m.Model(*m.get_init_inputs())
x = m.get_inputs()
t = time.time()
with torch.no_grad():
    y32 = model(*x)
    ycl = None
    if "--channels-last" in sys.argv:
        model_cl = model.to(memory_format=torch.channels_last)
        ycl = model_cl(*[a.to(memory_format=torch.channels_last) for a in x])
        model = model.to(memory_format=torch.contiguous_format)
    y64 = model.double()(*[a.double() for a in x])
print(f"forward passes: {time.time() - t:.1f} s")


def outside(y, ref):
    d = (y.double() - ref.double()).abs()
    return d.max().item(), int((d > 1e-4 + 1e-4 * ref.double().abs()).sum()), d.numel()


print("float32 vs float64: max abs %.3g, outside 1e-4: %d of %d" % outside(y32, y64))
if ycl is not None:
    print("float32 channels-last vs float32: max abs %.3g, outside 1e-4: %d of %d" % outside(ycl, y32))
print(f"float64 output: max |y| {y64.abs().max().item():.3g}, std {y64.std().item():.3g}")
