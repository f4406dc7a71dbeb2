"""Depthwise convolution (groups == in_channels, 1-D to 3-D) as one Triton window kernel per group.

The pooling design of ``_window.py`` with a weighted window: each program computes BLOCK contiguous
elements of the flattened output ``[N, C_out, O1, ..., Od]``, the filter window is unrolled with
``tl.static_range`` (its sizes are compile-time constants), loads that fall into the zero padding are
masked, and every tap is one fp32 FMA (no tensor cores: a depthwise conv has no reduction over channels,
so it is memory-bound and exact fp32 costs nothing). The filter ``w[c_out, 0, k...]`` is tiny: it is
loaded per tap from the output channel's row (a few distinct addresses per block, served from cache).
The bias and the elementwise chain after the convolution run as the epilogue before the store.
"""

from __future__ import annotations

from typing import Any

from tritonsmith.agents.builtin._ir import Node
from tritonsmith.agents.builtin._kernelbase import KernelSource, KernelWriter, WindowDim, channel_fastest_lines
from tritonsmith.agents.builtin._partition import FULL, Group, Plan, layout

__all__ = ["dwconv_kernel"]


def _spatial_dims(n: Node, x: Node, x_strides: tuple[int, ...]) -> list[WindowDim]:
    a = n.attrs
    return [WindowDim(i, o, k, s, p, d, st) for i, o, k, s, p, d, st in
            zip(x.shape[2:], n.shape[2:], a["kernel"], a["stride"], a["padding"], a["dilation"], x_strides[2:],
                strict=True)]


def _index_lines(n: Node, wins: list[WindowDim], xs: tuple[int, ...], xoff: int, ws: tuple[int, ...],
                 woff: int) -> list[str]:
    """Split the flat output index ``lin`` into window starts ``start{j}``, the output channel ``c`` and
    the batch ``b``; ``xb`` / ``wb`` are the offsets of input channel ``c // mult`` and of filter ``c``."""
    lines: list[str] = []
    inner = 1
    for j in range(len(wins) - 1, -1, -1):
        dim = wins[j]
        q = "lin" if inner == 1 else f"(lin // {inner})"
        o = "(lin * 0)" if dim.o == 1 else f"({q} % {dim.o})"  # a tensor even then: masks built from it stay tensors
        start = o if dim.s == 1 else f"{o} * {dim.s}"
        lines.insert(0, f"start{j} = {start}" + (f" - {dim.p}" if dim.p else "") +
                     f"  # first input position of the window along spatial dim {j}")
        inner *= dim.o
    batch, c_out, mult = n.shape[0], n.shape[1], int(n.attrs["mult"])
    lines.append(f"c = (lin // {inner}) % {c_out}  # output channel: in range even on masked lanes")
    xterms = [f"(c // {mult}) * {xs[1]}" if mult > 1 else f"c * {xs[1]}"]
    if batch > 1:
        lines.append(f"b = lin // {inner * c_out}  # image")
        xterms.insert(0, f"b * {xs[0]}")
    lines.append(f"xb = {' + '.join(xterms + ([str(xoff)] if xoff else []))}  # image b, input channel c // {mult}")
    lines.append(f"wb = c * {ws[0]}" + (f" + {woff}" if woff else "") + "  # filter of output channel c")
    return lines


def _tap_loops(wins: list[WindowDim], xptr: str, wptr: str, w_strides: tuple[int, ...]) -> list[str]:
    """The unrolled filter window: nested static loops, masks only along dims whose window can reach the
    padding, one fp32 FMA per tap."""
    lines = ["acc = tl.zeros([BLOCK], dtype=tl.float32)"]
    depth, m, p, wo = 0, "mask", "xb", "wb"
    for j, dim in enumerate(wins):
        pad = "    " * depth
        pos = f"start{j}"
        if dim.k > 1:
            lines.append(f"{pad}for k{j} in tl.static_range({dim.k}):")
            depth += 1
            pad = "    " * depth
            pos = f"start{j} + k{j}" + (f" * {dim.d}" if dim.d != 1 else "")
            wo = f"{wo} + k{j}" + (f" * {w_strides[j]}" if w_strides[j] != 1 else "")
        lines.append(f"{pad}i{j} = {pos}")
        conds = ([f"(i{j} >= 0)"] if dim.low else []) + ([f"(i{j} < {dim.i})"] if dim.high else [])
        if conds:  # this dim's window can reach the zero padding
            lines.append(f"{pad}m{j} = {m}" + "".join(f" & {c}" for c in conds))
            m = f"m{j}"
        lines.append(f"{pad}p{j} = {p} + i{j}" + (f" * {dim.st}" if dim.st != 1 else ""))
        p = f"p{j}"
    pad = "    " * depth
    # c is always a valid channel, so the filter tap needs no mask
    lines.append(f"{pad}wv = tl.load({wptr} + {wo}).to(tl.float32)")
    lines.append(f"{pad}xv = tl.load({xptr} + {p}, mask={m}, other=0.0).to(tl.float32)")
    lines.append(f"{pad}acc = tl.fma(xv, wv, acc)  # one rounding per tap, fp32")
    return lines


def dwconv_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    """out[b, c, o...] = sum over k... of w[c, 0, k...] * x[b, c // mult, o * stride - padding + k * dilation]
    (then the group's epilogue: bias and the elementwise chain)."""
    w = KernelWriter(plan, g, name)
    n = g.nodes[0]
    x, wt = n.args[0], n.args[1]
    xbase, xs, xoff = layout(x, plan.owner)
    wbase, ws, woff = layout(wt, plan.owner)
    xptr, wptr = w.base_ptr(xbase), w.base_ptr(wbase)
    w.check_size(g.numel)
    wins = _spatial_dims(n, x, xs)
    walk = channel_fastest_lines(g, x, xs)  # net-cl: channel-fastest lanes
    body = _index_lines(n, wins, xs, xoff, ws, woff) + _tap_loops(wins, xptr, wptr, ws[2:])
    body.append(f"v{n.id} = acc  # {_describe(n)}")
    cache: dict[Any, str] = {}
    for node in g.nodes[1:]:
        w.pointwise_line(node, body, cache)
    body += [w.store(o, FULL) for o in g.outputs]
    block = int(cfg.get("BLOCK", 1024))
    pid = "tl.program_id(0).to(tl.int64)" if w.idx64 else "tl.program_id(0)"
    taps = 1
    for dim in wins:
        taps *= dim.k
    title = (f"Depthwise convolution of {list(x.shape)} with filters {list(wt.shape)} -> {list(n.shape)} "
             f"({taps} taps per output, unrolled; zero padding by masks), fp32 FMA accumulation, then "
             f"{len(g.nodes) - 1} fused ops. One program per BLOCK contiguous outputs: out[b, c, o] = "
             f"sum_k w[c, 0, k] * x[b, c // {n.attrs['mult']}, o * stride - padding + k * dilation] per spatial dim.")
    src = [f"@triton.jit\ndef {name}_kernel({w.signature(['BLOCK'])}):", w.docstring(title),
           f"    lin = {pid} * BLOCK + tl.arange(0, BLOCK)",
           f"    mask = lin < {w.size(g.numel)}"] + [f"    {line}" for line in walk + body]
    launcher = w.launcher(f"(triton.cdiv({w.size(g.numel)}, {block}),)",
                          {"BLOCK": block, "num_warps": int(cfg.get("num_warps", 4))},
                          f"Launch {name}_kernel: depthwise conv + {len(g.nodes) - 1} fused elementwise ops.")
    return KernelSource(name, "\n".join(src) + "\n", launcher, w.bases, list(g.outputs), w.helpers)


def _describe(n: Node) -> str:
    a = n.attrs
    return (f"depthwise conv: kernel={a['kernel']}, stride={a['stride']}, padding={a['padding']}, "
            f"dilation={a['dilation']}, channel multiplier={a['mult']}")
