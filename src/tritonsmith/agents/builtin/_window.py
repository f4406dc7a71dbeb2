"""Pooling windows: max and average pooling (1-D, 2-D, 3-D) as one Triton kernel per window group.

Each program computes BLOCK contiguous elements of the flattened output (so consecutive lanes write
consecutive outputs and read neighbouring inputs), unrolls the window with ``tl.static_range`` (its
sizes are compile-time constants), masks the loads that fall into the padding (max: -inf, avg: 0),
accumulates in fp32 and then runs the elementwise chain after the pooling (the group's epilogue)
before storing.
"""

from __future__ import annotations

from typing import Any

from tritonsmith.agents.builtin._exprs import offset_expr
from tritonsmith.agents.builtin._ir import Node, numel
from tritonsmith.agents.builtin._kernelbase import KernelSource, KernelWriter, WindowDim, channel_fastest_lines
from tritonsmith.agents.builtin._partition import FULL, Group, Plan, layout

__all__ = ["by_rows", "window_kernel"]


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


def _index_lines(lead: list[tuple[int, int]], wins: list[WindowDim], offset: int,
                 by_row: bool = False) -> tuple[list[str], str]:
    """Lines splitting the output index into window starts ``start{j}``; returns them and the expression of the
    leading dims' input offset. The flat index ``lin``; or, ``by_row``, a program's ``row`` (the index over every
    dim but the last window dim) and its lanes' ``col`` along that dim: then only the last start varies along
    the lanes, and the others are per-program values (no division or modulo per element)."""
    lines: list[str] = []
    inner = 1
    idx = "row" if by_row else "lin"
    for j in range(len(wins) - 1, -1, -1):
        dim = wins[j]
        lanes = by_row and j == len(wins) - 1
        q = idx if inner == 1 else f"({idx} // {inner})"
        o = "col" if lanes else q if j == 0 and not lead else f"({q} % {dim.o})"
        start = o if dim.s == 1 else f"{o} * {dim.s}"
        # by row, a per-program start is held as a vector: masks combine it with the lanes' (Triton's
        # interpreter rejects a vector mask and-ed with a scalar one)
        held = " + tl.zeros_like(col)" if by_row and not lanes else ""
        lines.insert(0, f"start{j} = {start}" + (f" - {dim.p}" if dim.p else "") + held +
                     f"  # first input position of the window along pooled dim {j}")
        inner *= 1 if lanes else dim.o
    if not lead:
        return lines, str(offset)
    lines.append(f"q = {idx} // {inner}  # index over the leading (copied) dims" if inner != 1 else
                 f"q = {idx}  # index over the leading (copied) dims")
    shape = tuple(s for s, _ in lead)
    return lines, offset_expr("q", shape, tuple(st for _, st in lead), offset)


def by_rows(g: Group, block: int) -> bool:
    """Whether a window group can run one output row per program (:func:`window_kernel`'s ``rows`` option):
    a row-major output whose last windowed dim has at least two blocks of outputs, and few enough blocks for
    the grid's second axis."""
    n = g.nodes[0]
    if n.op not in ("max", "avg"):  # a depthwise convolution's window group has its own kernel (_dwconv.py)
        return False
    _, wins = _dims(n, n.args[0], (0,) * len(n.shape))  # strides do not matter to the dims
    o = wins[-1].o
    return 2 * block <= o and -(-o // block) <= 65535


def _window_loops(n: Node, wins: list[WindowDim], ptr: str, base: str, fp32: str) -> list[str]:
    """The unrolled window: nested static loops, per-dim masks only where padding can be hit, fp32 acc."""
    is_max = n.op == "max"
    other = "-float('inf')" if is_max else "0.0"
    lines = [f"acc = tl.full([BLOCK], {other}, tl.float32)", f"p_ = {base}"]
    depth, m, p = 0, "mask", "p_"
    for j, dim in enumerate(wins):
        pad = "    " * depth
        pos = f"start{j}"
        if dim.k > 1:
            lines.append(f"{pad}for k{j} in tl.static_range({dim.k}):")
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


def window_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    w = KernelWriter(plan, g, name)
    n = g.nodes[0]
    x = n.args[0]
    base, strides, offset = layout(x, plan.owner)
    ptr = w.base_ptr(base)
    w.check_size(g.numel)
    lead, wins = _dims(n, x, strides)
    walk = channel_fastest_lines(g, x, strides)  # net-cl: channel-fastest lanes
    block = int(cfg.get("BLOCK", 1024))
    rows = bool(cfg.get("rows")) and not walk and by_rows(g, block)
    idx, base_off = _index_lines(lead, wins, offset, by_row=rows)
    fp32 = ".to(tl.float32)"
    body = idx + _window_loops(n, wins, ptr, base_off, fp32)
    if n.op == "max":
        body.append(f"v{n.id} = acc  # {_describe_window(n)}")
    else:
        body.append(f"v{n.id} = acc / {_divisor(n, wins)}  # {_describe_window(n)}")
    cache: dict[Any, str] = {}
    for node in g.nodes[1:]:
        w.pointwise_line(node, body, cache)
    body += [w.store(o, FULL) for o in g.outputs]
    pid = "tl.program_id(0).to(tl.int64)" if w.idx64 else "tl.program_id(0)"
    vol = numel(tuple(d.k for d in wins))
    title = (f"{'Max' if n.op == 'max' else 'Average'} pooling of {list(x.shape)} -> {list(n.shape)} "
             f"({vol} window elements per output, unrolled; padding reads "
             f"{'-inf' if n.op == 'max' else '0'}), fp32 accumulation, then {len(g.nodes) - 1} fused ops. "
             "One program per BLOCK contiguous outputs: out[o] = reduce over k of x[o * stride - padding + "
             "k * dilation] per pooled dim.")
    if rows:  # one output row per program along axis 0, BLOCK of its columns per program along axis 1
        o = wins[-1].o
        head = [f"row = {pid}", "col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)",
                f"mask = col < {o}", f"lin = row * {o} + col"]
        grid = f"({w.size(g.numel // o)}, triton.cdiv({o}, {block}))"
        title = title.replace("One program per BLOCK contiguous outputs", "One program per BLOCK outputs of one row")
    else:
        head = [f"lin = {pid} * BLOCK + tl.arange(0, BLOCK)", f"mask = lin < {w.size(g.numel)}"]
        grid = f"(triton.cdiv({w.size(g.numel)}, {block}),)"
    src = [f"@triton.jit\ndef {name}_kernel({w.signature(['BLOCK'])}):", w.docstring(title)] + \
        [f"    {line}" for line in head + walk + body]
    launcher = w.launcher(grid,
                          {"BLOCK": block, "num_warps": int(cfg.get("num_warps", 4))},
                          f"Launch {name}_kernel: {n.op} pooling + {len(g.nodes) - 1} fused elementwise ops.")
    return KernelSource(name, "\n".join(src) + "\n", launcher, w.bases, list(g.outputs), w.helpers)


def _describe_window(n: Node) -> str:
    a = n.attrs
    extra = "" if n.op == "max" else f", count_include_pad={a.get('count_include_pad')}, " \
                                     f"divisor_override={a.get('divisor_override')}"
    return (f"{n.op} pool: kernel={a['kernel']}, stride={a['stride']}, padding={a['padding']}, "
            f"dilation={a['dilation']}, ceil_mode={a['ceil_mode']}{extra}")
