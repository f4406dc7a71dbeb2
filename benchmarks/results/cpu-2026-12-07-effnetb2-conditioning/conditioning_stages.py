"""Stage-by-stage conditioning of KernelBench level-3 24_EfficientNetB2 (float32 vs float64, training-mode BN).

Run: python benchmarks/results/cpu-2026-12-07-effnetb2-conditioning/conditioning_stages.py
"""
from __future__ import annotations

import copy
import importlib.util
import sys
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn

REF = Path(__file__).resolve().parents[3] / ".kb/level3/24_EfficientNetB2.py"
TOL = 1e-4  # kernelbench fp32: torch.allclose(atol=rtol=1e-4)
Record = dict[str, torch.Tensor]


def load_ref():
    spec = importlib.util.spec_from_file_location("ref24", REF)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def stages(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Every leaf except ReLUs (in place, shared), each top-level mbconv block also as a whole, in forward order."""
    out: list[tuple[str, nn.Module]] = []
    for name, child in model.named_children():
        if isinstance(child, nn.Sequential):
            out += [(f"{name}.{i}:{type(m).__name__}", m) for i, m in child.named_children() if not isinstance(m, nn.ReLU)]
            out.append((f"{name} (block out)", child))
        elif not isinstance(child, nn.ReLU):
            out.append((f"{name}:{type(child).__name__}", child))
    return out


def run(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, Record, Record]:
    outs: Record = {}
    bn_in: Record = {}
    hooks = []
    for name, m in stages(model):
        def hook(mod: nn.Module, inp: tuple[torch.Tensor, ...], out: torch.Tensor, name: str = name) -> None:
            outs[name] = out.detach().clone()  # clone: the following ReLU is in place
            if isinstance(mod, nn.BatchNorm2d):
                bn_in[name] = inp[0].detach().clone()
        hooks.append(m.register_forward_hook(hook))
    with torch.no_grad():
        y = model(x)
    for h in hooks:
        h.remove()
    return y, outs, bn_in


def maxdiff(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float, bool]:
    a, b = a.double(), b.double()
    d = (a - b).abs()
    return d.max().item(), (d.max() / b.abs().max().clamp_min(1e-30)).item(), torch.allclose(a, b, atol=TOL, rtol=TOL)


def bn_stats(x32: torch.Tensor, x64: torch.Tensor, eps: float) -> str:
    """n = N*H*W values per channel; maxgain = max 1/sqrt(var+eps); var<eps = channels in the high-gain (near-linear)
    regime; flipch = channels where sign(x - mean) differs f32 vs f64; margin = min |x - mean|_f64 / |f32 error of it|
    (below 1: rounding already flips a sign)."""
    n = x64.shape[0] * x64.shape[2] * x64.shape[3]
    dims = (0, 2, 3)
    c64 = x64 - x64.mean(dims, keepdim=True)
    c32 = x32.double() - x32.double().mean(dims, keepdim=True)
    var = x64.var(dims, unbiased=False)
    gain = 1.0 / torch.sqrt(var + eps)  # d(out)/d(x - mean), <= 1/sqrt(eps) = 316
    hi = int((var < eps).sum())  # std below sqrt(eps): near-linear regime with gain > 224
    # closeness to a sign flip: |x - mean| (f64) in units of the f32-vs-f64 error of the centred input
    err = (c32 - c64).abs().clamp_min(1e-300)
    margin = (c64.abs() / err).min().item()
    flips = int(((c32 > 0) != (c64 > 0)).logical_and(c64 != 0).any(3).any(2).any(0).sum())  # channels
    return f"n={n:<6d} maxgain={gain.max().item():7.1f} var<eps:{hi:4d}/{var.numel():<4d} flipch={flips:<4d} margin={margin:.3g}"


def tf32_round(t: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32 (10-bit mantissa), round half away from zero, as an H100 conv would see its operands."""
    i = t.contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)


def tf32_hooks(model: nn.Module) -> list[torch.utils.hooks.RemovableHandle]:
    def pre(mod: nn.Conv2d, inp: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor]:
        mod.weight.data = tf32_round(mod.weight.data)
        return (tf32_round(inp[0]),)
    return [m.register_forward_pre_hook(pre) for m in model.modules() if isinstance(m, nn.Conv2d)]


def main() -> None:
    torch.set_num_threads(2)
    ref = load_ref()
    torch.manual_seed(0)
    m32 = ref.Model(*ref.get_init_inputs())
    torch.manual_seed(0)
    (x,) = ref.get_inputs()
    m64 = copy.deepcopy(m32).double()
    p32, p64 = copy.deepcopy(m32), copy.deepcopy(m64)  # pristine copies (train-mode forwards update running stats)
    print(f"torch {torch.__version__}, input {tuple(x.shape)}, training={m32.training}, threads={torch.get_num_threads()}")

    t0 = time.perf_counter()
    y32, o32, b32 = run(m32, x)
    t1 = time.perf_counter()
    y64, o64, b64 = run(m64, x.double())
    t2 = time.perf_counter()
    print(f"wall: float32 forward {t1 - t0:.2f}s, float64 forward {t2 - t1:.2f}s\n")

    print(f"{'stage':34s} {'shape':20s} {'maxabs32v64':>11s} {'rel':>9s} {'allclose':>8s}  BatchNorm2d input stats")
    first_fail = None
    for name, _ in stages(m32):
        a, r, ok = maxdiff(o32[name], o64[name])
        if not ok and first_fail is None:
            first_fail = name
        extra = ""
        if name in b32:
            eps = dict(stages(m64))[name].eps
            extra = bn_stats(b32[name], b64[name], eps)
        print(f"{name:34s} {str(tuple(o32[name].shape)):20s} {a:11.3e} {r:9.2e} {str(ok):>8s}  {extra}")
    a, r, ok = maxdiff(y32, y64)
    print(f"\nfinal output: maxabs f32 vs f64 = {a:.4f} (rel {r:.3e}), allclose(1e-4) = {ok}; first stage over tol: {first_fail}")
    print(f"output scale: max|y64| = {y64.abs().max().item():.4f}, mean|y64| = {y64.abs().mean().item():.4f}")

    # perturbations of the float32 reference (each from a fresh copy of the same weights)
    def pert(label: str, fn: Callable[[], torch.Tensor], base: torch.Tensor) -> None:
        a, r, ok = maxdiff(fn(), base)
        print(f"  {label:58s} maxabs {a:9.4e}  rel {r:9.2e}  allclose {ok}")

    g = torch.Generator().manual_seed(1)
    noise = torch.randn(x.shape, generator=g)
    print("\nperturbations (compared with the unperturbed run of the same dtype):")
    for rel in (1e-7, 1e-6):
        pert(f"f32 input x*(1+{rel:g}*randn)", lambda: run(copy.deepcopy(p32), x * (1 + rel * noise))[0], y32)
        pert(f"f64 input x*(1+{rel:g}*randn)", lambda: run(copy.deepcopy(p64), x.double() * (1 + rel * noise.double()))[0], y64)
    pert("f32 channels_last (model + input)",
         lambda: run(copy.deepcopy(p32).to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last))[0], y32)
    mt = copy.deepcopy(p32)
    tf32_hooks(mt)
    pert("f32 with TF32-rounded conv operands (emulated)", lambda: run(mt, x)[0], y32)
    # controls: same weights in eval mode (running stats 0/1), and a larger batch in training mode
    e32, e64 = copy.deepcopy(p32).eval(), copy.deepcopy(p64).eval()
    pert("CONTROL eval() mode: f32 vs f64", lambda: run(e32, x)[0], run(e64, x.double())[0])
    torch.manual_seed(0)
    xb = torch.rand(16, 3, 224, 224)
    pert("CONTROL train mode, batch 16: f32 vs f64", lambda: run(copy.deepcopy(p32), xb)[0], run(copy.deepcopy(p64), xb.double())[0])


if __name__ == "__main__":
    sys.exit(main())
