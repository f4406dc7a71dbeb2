"""Pooling windows: max and average pooling (1-D, 2-D, 3-D) as one Triton kernel per window group.

Each program computes BLOCK contiguous elements of the flattened output (so consecutive lanes write
consecutive outputs and read neighbouring inputs), unrolls the window with ``tl.static_range`` (its
sizes are compile-time constants), masks the loads that fall into the padding (max: -inf, avg: 0),
accumulates in fp32 and then runs the elementwise chain after the pooling (the group's epilogue)
before storing.
"""

from __future__ import annotations

from typing import Any

from tritonsmith.agents.builtin._convcl import channels_last_strides
from tritonsmith.agents.builtin._exprs import broadcast_strides, offset_expr
from tritonsmith.agents.builtin._ir import PW, Node, contiguous_strides, is_fill, numel
from tritonsmith.agents.builtin._kernelbase import KernelSource, KernelWriter, WindowDim, channel_fastest_lines
from tritonsmith.agents.builtin._partition import FULL, PRO, Group, Plan, layout, resolve_base

__all__ = ["window_kernel"]


def _dims(n: Node, x: Node, strides: tuple[int, ...]) -> tuple[list[tuple[int, int]], list[WindowDim]]:
    """(leading copied dims as (size, stride), windowed dims): size-1 copied dims are dropped, copied dims
    before the first window are the leading part, later copied dims are windows of one element."""
    a = n.attrs
    lead: list[tuple[int, int]] = []
    wins: list[WindowDim] = []
    for j, (i, o, st) in enumerate(zip(x.shape, n.shape, strides, strict=True)):
        k, s, p, d = a["kernel"][j], a["stride"][j], a["padding"][j], a["dilation"][j]
        copy = (k, s, p, d) == (1, 1, 0, 1)
        if copy and o == 1:
            continue
        if copy and not wins:
            lead.append((o, st))
        else:
            wins.append(WindowDim(i, o, k, s, p, d, st))
    if not wins:  # every window is one element (a copy): the innermost dim stands as the window
        o, st = lead.pop() if lead else (1, 0)
        wins.append(WindowDim(o, o, 1, 1, 0, 1, st))
    return lead, wins


def _lead_dims(n: Node, x: Node) -> set[int]:
    """The dimensions of ``x`` that ``_dims`` counts as leading: copied (no window) and before the first window."""
    a = n.attrs
    lead: set[int] = set()
    for j in range(len(x.shape)):
        if (a["kernel"][j], a["stride"][j], a["padding"][j], a["dilation"][j]) != (1, 1, 0, 1):
            break
        lead.add(j)
    return lead


def _index_lines(lead: list[tuple[int, int]], wins: list[WindowDim], offset: int) -> tuple[list[str], str]:
    """Lines splitting the flat output index ``lin`` into window starts ``start{j}``; returns them and
    the expression of the leading dims' input offset."""
    lines: list[str] = []
    inner = 1
    for j in range(len(wins) - 1, -1, -1):
        dim = wins[j]
        q = "lin" if inner == 1 else f"(lin // {inner})"
        o = q if j == 0 and not lead else f"({q} % {dim.o})"
        start = o if dim.s == 1 else f"{o} * {dim.s}"
        lines.insert(0, f"start{j} = {start}" + (f" - {dim.p}" if dim.p else "") +
                     f"  # first input position of the window along pooled dim {j}")
        inner *= dim.o
    if not lead:
        return lines, str(offset)
    lines.append(f"q = lin // {inner}  # index over the leading (copied) dims")
    shape = tuple(s for s, _ in lead)
    return lines, offset_expr("q", shape, tuple(st for _, st in lead), offset)


_UNROLLED_PROLOGUE_TAPS = 8  # window elements a prologue kernel unrolls whole (78's first 2x2x2 window: 0 spills)


def _window_loops(n: Node, wins: list[WindowDim], ptr: str, base: str, fp32: str,
                  tap: _PrologueTap | None = None) -> list[str]:
    """The unrolled window: nested static loops, per-dim masks only where padding can be hit, fp32 acc.
    ``tap``: a prologue computes the window's input at each tap (None: loaded from ``ptr``)."""
    is_max = n.op == "max"
    other = "-float('inf')" if is_max else "0.0"
    lines = [f"acc = tl.full([BLOCK], {other}, tl.float32)", f"p_ = {base}"]
    if tap is not None:
        lines += tap.before("p_")
    depth, m, p = 0, "mask", "p_"
    inner = max((j for j, dim in enumerate(wins) if dim.k > 1), default=-1)
    # a prologue's taps unrolled over the whole window spilled (78's 6x6x6 window: 3492 registers; 85's 4x4 with
    # GroupNorm's chain: 22; sm_90 AOT): there, only the innermost windowed dim is unrolled, the others loop
    rolled = tap is not None and numel(tuple(d.k for d in wins)) > _UNROLLED_PROLOGUE_TAPS
    for j, dim in enumerate(wins):
        pad = "    " * depth
        pos = f"start{j}"
        if dim.k > 1:
            loop = "range" if rolled and j != inner else "tl.static_range"
            lines.append(f"{pad}for k{j} in {loop}({dim.k}):")
            depth += 1
            pad = "    " * depth
            pos = f"start{j} + k{j}" + (f" * {dim.d}" if dim.d != 1 else "")
        lines.append(f"{pad}i{j} = {pos}")
        conds = ([f"(i{j} >= 0)"] if dim.low else []) + ([f"(i{j} < {dim.i})"] if dim.high else [])
        if conds:  # this dim's window can reach the padding (or ceil_mode's partial window)
            lines.append(f"{pad}m{j} = {m}" + "".join(f" & {c}" for c in conds))
            m = f"m{j}"
        lines.append(f"{pad}p{j} = {p} + i{j}" + (f" * {dim.st}" if dim.st != 1 else ""))
        p = f"p{j}"
    pad = "    " * depth
    load = f"tl.load({ptr} + {p}, mask={m}, other={other}){fp32}"
    if tap is not None:
        lines += [pad + ln for ln in tap(p, m, other)]
        load = "t_"
    if is_max:  # NaN propagates, as in torch's max pooling
        lines.append(f"{pad}acc = tl.maximum(acc, {load}, propagate_nan=tl.PropagateNan.ALL)")
    else:
        lines.append(f"{pad}acc += {load}")
    return lines


def _divisor(n: Node, wins: list[WindowDim]) -> str:
    """Average pooling's divisor (torch's semantics): divisor_override; else the window clipped to the
    padded input (count_include_pad) or to the input itself (not count_include_pad). A float literal,
    or an fp32 expression where it varies per output (only at the borders it can reach)."""
    a = n.attrs
    if a.get("divisor_override"):
        return repr(float(a["divisor_override"]))
    const, terms = 1, []
    for j, dim in enumerate(wins):
        if a.get("count_include_pad", True):
            if (dim.o - 1) * dim.s - dim.p + dim.k <= dim.i + dim.p:  # the window never passes the right padding
                const *= dim.k
            else:
                terms.append(f"(tl.minimum(start{j} + {dim.k}, {dim.i + dim.p}) - start{j})")
        elif not dim.low and not dim.high:
            const *= dim.k
        else:
            hi = f"tl.minimum(start{j} + {dim.k}, {dim.i})" if dim.high else f"(start{j} + {dim.k})"
            lo = f"tl.maximum(start{j}, 0)" if dim.low else f"start{j}"
            terms.append(f"({hi} - {lo})")
    if not terms:
        return repr(float(const))
    return "(" + " * ".join(([str(const)] if const != 1 else []) + terms) + ").to(tl.float32)"


class _PrologueTap:
    """Lines computing the window group's prologue (the chain whose last value is ``x``) at one tap: its inputs
    read at the tap's row-major index of ``x``, then ``t_``, the value pooled (``other`` in the padding, where the
    chain's value is not the padding's). Inputs constant across the window (a per-channel bias) are loaded once
    per output, before the window's loops (``before``)."""

    def __init__(self, w: KernelWriter, x: Node, lead: set[int]) -> None:
        self.w, self.x, self.lead = w, x, lead
        self.hoisted: dict[tuple[Any, ...], str] = {}

    def _constant(self, a: Node, use: tuple[int, ...]) -> bool:
        """Is external ``a``, read at shape ``use`` (``x``'s or a reshape of it), the same at every element of a
        window? The window's elements lie in one aligned block of ``x``'s row-major order (everything after the
        leading, copied dimensions), so a dimension of ``use`` that ``a`` varies along must hold whole blocks."""
        block = numel(tuple(s for d, s in enumerate(self.x.shape) if d not in self.lead))
        bstrides = broadcast_strides(a.shape, layout(a, self.w.plan.owner)[1], use)
        return all(st == 0 or numel(use[d + 1:]) % block == 0 for d, st in enumerate(bstrides) if use[d] > 1)

    def before(self, base: str) -> list[str]:
        """Loads of the window-constant inputs at ``base`` (the row-major index of the window's leading
        coordinates, every other coordinate 0)."""
        lines: list[str] = []
        cache: dict[Any, str] = {}
        w = self.w
        w.full_index = (base, "mask")
        for node in w.g.prologue:
            if node.kind != PW:
                continue
            as_float = node.dtype.is_floating_point or node.op in ("where",)
            for a in node.node_args():
                if not w.g.has(a) and not is_fill(resolve_base(a, w.plan.owner)) and self._constant(a, node.shape):
                    var = w.value(a, node.shape, FULL, lines, cache, as_float)
                    self.hoisted[(a.id, node.shape, FULL)] = var
        w.full_index = ("lin", "mask")
        return lines

    def __call__(self, index: str, mask: str, other: str) -> list[str]:
        lines: list[str] = []
        w = self.w
        cache = {(*key, index): var for key, var in self.hoisted.items()}
        w.full_index = (index, mask)
        for node in w.g.prologue:
            w.pointwise_line(node, lines, cache)
        w.full_index = ("lin", "mask")
        value = f"v{self.x.id}.to(tl.float32)"
        return lines + [f"t_ = tl.where({mask}, {value}, {other})" if mask != "mask" else f"t_ = {value}"]


def _prologue_strides(w: KernelWriter, x: Node) -> tuple[int, ...]:
    """The strides the window walks ``x`` by with a prologue: row-major (the taps' indices are ``x``'s own), or
    channels-last where every full-size input of the chain is (net-cl), so channel-fastest lanes stay coalesced."""
    full = [a for node in w.g.prologue for a in node.node_args() if not w.g.has(a) and a.shape == x.shape]
    cl = channels_last_strides(x.shape) if len(x.shape) in (4, 5) else None
    if full and cl is not None and all(layout(a, w.plan.owner)[1] == cl for a in full):
        return cl
    return contiguous_strides(x.shape)


def window_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    w = KernelWriter(plan, g, name)
    n = g.nodes[0]
    x = n.args[0]
    fp32 = ".to(tl.float32)"
    if g.prologue:  # x is computed per tap, never stored: the taps address it row-major
        strides, offset, ptr = contiguous_strides(x.shape), 0, ""
        w.check_size(x.numel)
        lead, wins = _dims(n, x, strides)
        idx, base_off = _index_lines(lead, wins, offset)
        walk = channel_fastest_lines(g, x, _prologue_strides(w, x))
        body = idx + _window_loops(n, wins, ptr, base_off, fp32, _PrologueTap(w, x, _lead_dims(n, x)))
    else:
        base, strides, offset = layout(x, plan.owner)
        ptr = w.base_ptr(base)
        lead, wins = _dims(n, x, strides)
        idx, base_off = _index_lines(lead, wins, offset)
        walk = channel_fastest_lines(g, x, strides)  # net-cl: channel-fastest lanes
        body = idx + _window_loops(n, wins, ptr, base_off, fp32)
    w.check_size(g.numel)
    if n.op == "max":
        body.append(f"v{n.id} = acc  # {_describe_window(n)}")
    else:
        body.append(f"v{n.id} = acc / {_divisor(n, wins)}  # {_describe_window(n)}")
    cache: dict[Any, str] = {}
    for node in g.nodes[1:]:
        if g.rank[node.id] != PRO:
            w.pointwise_line(node, body, cache)
    body += [w.store(o, FULL) for o in g.outputs]
    block = int(cfg.get("BLOCK", 1024))
    pid = "tl.program_id(0).to(tl.int64)" if w.idx64 else "tl.program_id(0)"
    vol = numel(tuple(d.k for d in wins))
    pro, epi = len(g.prologue), len(g.nodes) - 1 - len(g.prologue)
    first = f"): {pro} elementwise ops per window element (the prologue, never stored), then " if pro else "), "
    title = (f"{'Max' if n.op == 'max' else 'Average'} pooling of {list(x.shape)} -> {list(n.shape)} "
             f"({vol} window elements per output, unrolled; padding reads "
             f"{'-inf' if n.op == 'max' else '0'}{first}fp32 accumulation, then {epi} fused ops. "
             "One program per BLOCK contiguous outputs: out[o] = reduce over k of x[o * stride - padding + "
             "k * dilation] per pooled dim.")
    src = [f"@triton.jit\ndef {name}_kernel({w.signature(['BLOCK'])}):", w.docstring(title),
           f"    lin = {pid} * BLOCK + tl.arange(0, BLOCK)",
           f"    mask = lin < {w.size(g.numel)}"] + [f"    {line}" for line in walk + body]
    launcher = w.launcher(f"(triton.cdiv({w.size(g.numel)}, {block}),)",
                          {"BLOCK": block, "num_warps": int(cfg.get("num_warps", 4))},
                          (f"Launch {name}_kernel: {pro} prologue ops + " if pro else f"Launch {name}_kernel: ") +
                          f"{n.op} pooling + {epi} fused elementwise ops.")
    return KernelSource(name, "\n".join(src) + "\n", launcher, w.bases, list(g.outputs), w.helpers)


def _describe_window(n: Node) -> str:
    a = n.attrs
    extra = "" if n.op == "max" else f", count_include_pad={a.get('count_include_pad')}, " \
                                     f"divisor_override={a.get('divisor_override')}"
    return (f"{n.op} pool: kernel={a['kernel']}, stride={a['stride']}, padding={a['padding']}, "
            f"dilation={a['dilation']}, ceil_mode={a['ceil_mode']}{extra}")
