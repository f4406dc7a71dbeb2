"""Convolutions (dense, grouped, dilated, strided, transposed; 1-D to 3-D) as implicit-GEMM Triton kernels.

Per group ``g`` of ``groups``, the convolution is a GEMM that is never materialised:

    out[m, n] = sum_k A[m, k] * B[k, n],   m = (image, output position), n = output channel in the group,
                                            k = (input channel in the group, filter tap)

with M = N * O1 * ... * Od, N = C_out / groups, K = C_in / groups * K1 * ... * Kd. A tile of A is gathered from
the input through its strides (the "im2col" matrix exists only in registers), a tile of B is read from the
filter; k runs over (channel, taps) in the filter's own memory order, so a contiguous filter is read along k.
Each program computes a BLOCK_M x BLOCK_N tile with fp32 accumulation through tensor-core dots whose
precision keeps fp32 accuracy (``tf32x3``: three tf32 passes, as the matmul family; ``ieee`` a variant),
then runs the bias and the elementwise chain after the convolution as its epilogue and stores NCHW output.

Zero padding is a mask on the gathered loads. A transposed convolution gathers too: output position ``o``
takes tap ``t`` from input position ``i = (o + p - t * d) / s`` where that is a whole number in range, with the
filter read as ``w[c_in, c_out, taps]``. By default it runs by output phases (the sub-pixel decomposition):
the outputs with ``o % s == r`` form one implicit GEMM (grid axis 1: group x phase) over only the taps
``t = t0(r) + u * s / gcd(s, d)`` that land on whole input positions, and there ``i = o // s + const - u * d /
gcd(s, d)`` is a shifted window again. The gather form (``phases=False``, the ``conv-gather`` variant) visits
every tap and masks the (s - 1) / s of them that fall between input positions.
"""

from __future__ import annotations

__all__ = ["ConvGeometry", "conv_geometry", "conv_kernel", "nhwc_ok"]

import math
from dataclasses import dataclass
from typing import Any

from tritonsmith.agents.builtin._ir import Node, contiguous_strides
from tritonsmith.agents.builtin._kernelbase import KernelSource, KernelWriter
from tritonsmith.agents.builtin._partition import FULL, Group, Plan, layout


@dataclass(frozen=True)
class ConvGeometry:
    """Sizes of one convolution node's implicit GEMM and the layouts it reads."""

    batch: int
    groups: int
    cin_g: int
    cout_g: int
    cout: int
    ins: tuple[int, ...]       # input spatial sizes
    outs: tuple[int, ...]      # output spatial sizes
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    x: tuple[Node, tuple[int, ...], int]  # base, strides, offset
    w: tuple[Node, tuple[int, ...], int]

    @property
    def taps(self) -> int:
        t = 1
        for k in self.kernel:
            t *= k
        return t

    @property
    def positions(self) -> int:
        """Output positions per image and channel."""
        p = 1
        for o in self.outs:
            p *= o
        return p

    @property
    def m(self) -> int:
        return self.batch * self.positions

    @property
    def k(self) -> int:
        return self.cin_g * self.taps


def conv_geometry(plan: Plan, n: Node) -> ConvGeometry:
    x, wt = n.args
    a = n.attrs
    groups = int(a["groups"])
    return ConvGeometry(batch=x.shape[0], groups=groups, cin_g=x.shape[1] // groups, cout_g=n.shape[1] // groups,
                        cout=n.shape[1], ins=tuple(x.shape[2:]), outs=tuple(n.shape[2:]), kernel=tuple(a["kernel"]),
                        stride=tuple(a["stride"]), padding=tuple(a["padding"]), dilation=tuple(a["dilation"]),
                        transposed=bool(a["transposed"]), x=layout(x, plan.owner), w=layout(wt, plan.owner))


def _term(var: str, factor: int) -> str | None:
    """``var * factor`` without the multiplications by 0 and 1."""
    if factor == 0:
        return None
    return var if factor == 1 else f"{var} * {factor}"


def _sum(terms: list[str | None]) -> str:
    kept = [t for t in terms if t]
    return " + ".join(kept).replace("+ -", "- ") if kept else "0"


def _head_lines(s: ConvGeometry, i64: bool, m_text: str) -> list[str]:
    """Program ids, the tile's rows (m: image and output position; ``m_text`` of them, ``lead * positions``
    where the batch is a run-time size) and columns (n: output channel in the group), and each row's output
    coordinates ``o{j}`` and image ``img``."""
    cast = ".to(tl.int64)" if i64 else ""
    lines = ["pid = tl.program_id(0)",
             f"grp = tl.program_id(1){cast}  # convolution group" if s.groups > 1 else "",
             f"num_n = tl.cdiv({s.cout_g}, BLOCK_N)",
             "# consecutive programs share a row tile (the same input windows) while it is in L2",
             "pid_m = pid // num_n",
             "pid_n = pid % num_n",
             f"rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)){cast}  # image * positions + output position",
             "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel within the group",
             "rk = tl.arange(0, BLOCK_K)",
             f"mmask = rm < {m_text}",
             f"nmask = rn < {s.cout_g}"]
    inner = 1
    coords: list[str] = []
    for j in range(len(s.outs) - 1, -1, -1):
        q = "rm" if inner == 1 else f"(rm // {inner})"
        coords.insert(0, f"o{j} = {q} % {s.outs[j]}  # output position along spatial dim {j}")
        inner *= s.outs[j]
    lines += coords
    if s.batch > 1:
        lines.append(f"img = rm // {s.positions}  # image")
    return [ln for ln in lines if ln]


def _row_base(s: ConvGeometry) -> tuple[list[str], list[str]]:
    """Per-row (m) parts of the input address: lines, and the names of the per-row window origins ``h{j}``.

    Forward: the window of output ``o`` starts at ``o * s - p``. Transposed: ``u = o + p`` (the tap ``t`` then
    reads input ``(u - t * d) / s``)."""
    xs, xoff = s.x[1], s.x[2]
    lines: list[str] = []
    terms: list[str | None] = [_term("img", xs[0])] if s.batch > 1 else []
    if s.groups > 1:
        terms.append(_term("grp", s.cin_g * xs[1]))
    for j in range(len(s.outs)):
        if s.transposed:
            lines.append(f"h{j} = o{j}" + (f" + {s.padding[j]}" if s.padding[j] else "") +
                         f"  # o + padding along spatial dim {j}")
            if s.stride[j] == 1:  # a plain shifted window: this dim's address splits into row + column parts
                terms.append(_term(f"h{j}", xs[2 + j]))
        else:
            start = _term(f"o{j}", s.stride[j]) or "0"
            lines.append(f"h{j} = {start}" + (f" - {s.padding[j]}" if s.padding[j] else "") +
                         f"  # first input position of the window along spatial dim {j}")
            terms.append(_term(f"h{j}", xs[2 + j]))
    if not any(t and ("img" in t or "h" in t) for t in terms):
        terms.insert(0, "rm * 0")  # no per-row part: still one address per row
    if xoff:
        terms.append(str(xoff))
    lines.append(f"xm = {_sum(terms)}  # input address of each row's window origin")
    return lines, [f"h{j}" for j in range(len(s.outs))]


def _tap_lines(s: ConvGeometry) -> list[str]:
    """Inside the K loop: the column index ``k`` split into input channel ``c`` and taps ``t{j}``, the
    column parts of the input address (``xk``) and of the filter address (``wk``)."""
    lines = ["k = k0 + rk"]
    lines.append(f"c = k // {s.taps}  # input channel within the group" if s.taps > 1 else "c = k")
    inner = 1
    taps: dict[int, str] = {}
    for j in range(len(s.kernel) - 1, -1, -1):
        if s.kernel[j] > 1:
            q = "k" if inner == 1 else f"(k // {inner})"
            lines.append(f"t{j} = {q} % {s.kernel[j]}  # filter tap along spatial dim {j}")
            taps[j] = f"t{j}"
        inner *= s.kernel[j]
    xs, (ws, woff) = s.x[1], (s.w[1], s.w[2])
    xk: list[str | None] = [_term("c", xs[1])]
    for j, t in sorted(taps.items()):
        if not s.transposed:
            xk.append(_term(t, s.dilation[j] * xs[2 + j]))
        elif s.stride[j] == 1:
            xk.append(_term(t, -s.dilation[j] * xs[2 + j]))
    lines.append(f"xk = {_sum(xk)}")
    # filter: forward w[c_out, c, taps], transposed w[c_in, c_out_in_group, taps]
    wc = ws[0] if s.transposed else ws[1]
    contiguous = not s.transposed and wc == s.taps and all(ws[2 + j] == _inner(s.kernel, j) for j in taps)
    # a contiguous forward filter is read along k itself: (channel, taps) is its own memory order
    wk = "k" if contiguous else _sum([_term("c", wc)] + [_term(taps[j], ws[2 + j]) for j in sorted(taps)])
    if s.transposed and s.groups > 1:
        wk = f"{wk} + grp * {s.cin_g * ws[0]}"
    if woff:
        wk = f"{wk} + {woff}"
    lines.append(f"wk = {wk}")
    return lines


def _inner(kernel: tuple[int, ...], j: int) -> int:
    p = 1
    for k in kernel[j + 1:]:
        p *= k
    return p


def _gather_lines(s: ConvGeometry, xptr: str, kmask: bool) -> list[str]:
    """The A tile: masks for padding (and, transposed, for taps that fall between input positions), then
    the gathered load."""
    lines: list[str] = []
    conds = ["mmask[:, None]"] + (["(k < K)[None, :]"] if kmask else [])
    extra: list[str] = []
    for j in range(len(s.outs)):
        i, o, kk, st, p, d = s.ins[j], s.outs[j], s.kernel[j], s.stride[j], s.padding[j], s.dilation[j]
        tap = f"t{j}[None, :]" if kk > 1 else None
        if not s.transposed:
            low = p > 0
            high = (o - 1) * st - p + (kk - 1) * d >= i
            if not (low or high):
                continue
            shift = _term(tap, d) if tap else None
            pos = f"h{j}[:, None]" + (f" + {shift}" if shift else "")
            lines.append(f"i{j} = {pos}  # input position along spatial dim {j}")
            conds += ([f"(i{j} >= 0)"] if low else []) + ([f"(i{j} < {i})"] if high else [])
            continue
        shift = _term(tap, d) if tap else None
        lines.append(f"u{j} = h{j}[:, None]" + (f" - {shift}" if shift else "") +
                     f"  # o + p - t * d along spatial dim {j}")
        if st == 1:
            low = (kk - 1) * d > p
            high = o - 1 + p >= i
            conds += ([f"(u{j} >= 0)"] if low else []) + ([f"(u{j} < {i})"] if high else [])
            continue
        # strided: only taps landing on a whole input position count; clamp first so // and % see u >= 0
        lines.append(f"uc{j} = tl.maximum(u{j}, 0)")
        lines.append(f"i{j} = uc{j} // {st}  # input position along spatial dim {j}")
        conds += [f"(u{j} >= 0)", f"((uc{j} % {st}) == 0)", f"(i{j} < {i})"]
        extra.append(_term(f"i{j}", s.x[1][2 + j]) or "0")
    addr = "xm[:, None] + xk[None, :]" + "".join(f" + {e}" for e in extra)
    lines.append(f"amask = {' & '.join(conds)}")
    lines.append(f"xa = tl.load({xptr} + {addr}, mask=amask, other=0.0)")
    return lines


def conv_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    """out[img, grp * N + n, o...] = sum over (c, t...) of x[img, grp * C + c, i(o, t)...] * w[...]: the
    convolution as an implicit GEMM, then the group's epilogue (bias and the elementwise chain)."""
    w = KernelWriter(plan, g, name)
    n = g.nodes[0]
    s = conv_geometry(plan, n)
    xptr, wptr = w.base_ptr(s.x[0]), w.base_ptr(s.w[0])
    w.check_size(g.numel)
    w.check_size(s.m * s.cout)
    # shape-generic (_shapes): the batch is the leading size, a run-time argument; every stride stays fixed
    m_text = w.size(s.m, w.lead is not None and w.lead.batched(n))
    bm, bn, bk = int(cfg.get("BLOCK_M", 128)), int(cfg.get("BLOCK_N", 64)), int(cfg.get("BLOCK_K", 32))
    epi: list[str] = []
    cache: dict[Any, str] = {}
    for node in g.nodes[1:]:
        w.pointwise_line(node, epi, cache)
    epi += [w.store(o, FULL) for o in g.outputs]
    if cfg.get("layout") == "nhwc" and nhwc_ok(plan, n):
        return _nhwc_kernel(w, s, (xptr, wptr), m_text, cfg, epi)
    if s.transposed and cfg.get("phases", True):
        return _phase_kernel(w, s, (xptr, wptr), (bm, bn, bk), cfg, epi)
    row, _ = _row_base(s)
    wn = f"(grp * {s.cout_g} + rn) * {s.w[1][0]}" if not s.transposed else f"rn * {s.w[1][1]}"
    if not s.transposed and s.groups == 1:
        wn = f"rn * {s.w[1][0]}"
    kmask = s.k % bk != 0
    wmask = " & ".join((["(k < K)[:, None]"] if kmask else []) + (["nmask[None, :]"] if s.cout_g % bn else []))
    wload = f"tl.load({wptr} + wk[:, None] + wn[None, :]" + (f", mask={wmask}, other=0.0)" if wmask else ")")
    loop = (["acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
             f"wn = {wn}  # filter address of each output channel",
             "for k0 in range(0, K, BLOCK_K):"] +
            [f"    {ln}" for ln in _tap_lines(s) + _gather_lines(s, xptr, kmask)] +
            [f"    wb = {wload}",
             "    # fp32 inputs: \"tf32x3\" (three tensor-core passes) or \"ieee\" keep fp32 accuracy; tf32 would not",
             "    acc = tl.dot(xa, wb, acc, input_precision=PRECISION)"])
    body = _head_lines(s, w.idx64, m_text) + row + loop + _tail(s, n) + epi
    title = (f"{_describe(s)}: implicit GEMM per group, M = {m_text} (image x output position), N = {s.cout_g} "
             f"(output channels per group), K = {s.k} (input channels per group x taps), fp32 accumulation "
             f"with tensor-core dots (PRECISION), then {len(g.nodes) - 1} fused ops.")
    return _gemm_source(w, title, s.k, body, f"(triton.cdiv({m_text}, {bm}) * triton.cdiv({s.cout_g}, {bn}), "
                        f"{s.groups})", (bm, bn, bk), cfg, "implicit-GEMM convolution")


def _tail(s: ConvGeometry, n: Node) -> list[str]:
    """After the K loop: each tile element's NCHW output index ``lin`` and mask, and the convolution's value."""
    co = f"grp * {s.cout_g} + rn" if s.groups > 1 else "rn"
    sp = f"rm % {s.positions}" if s.batch > 1 else "rm"
    return [f"co = {co}  # output channel",
            (f"lin = (img[:, None] * {s.cout} + co[None, :]) * {s.positions} + ({sp})[:, None]" if s.batch > 1
             else f"lin = co[None, :] * {s.positions} + rm[:, None]"),
            "mask = mmask[:, None] & nmask[None, :]",
            f"v{n.id} = acc"]


# -- channels-last (NHWC) staging -----------------------------------------------------------------------
def nhwc_ok(plan: Plan, n: Node) -> bool:
    """Can convolution ``n`` run on channels-last copies (``layout="nhwc"``)? Its input and filter are contiguous
    tensors of their own (the launcher copies them), each group has a multiple of 16 input channels (whole
    channel blocks per tap: no masks along k, aligned 16-byte loads), and a transposed one has stride 1 (a
    shifted window; strided ones run by output phases)."""
    s = conv_geometry(plan, n)
    dense = all(st == contiguous_strides(b.shape) and off == 0 and tuple(b.shape) == tuple(a.shape)
                for a, (b, st, off) in zip(n.args, (s.x, s.w), strict=True))
    return dense and s.cin_g % 16 == 0 and not (s.transposed and any(st != 1 for st in s.stride))


def _nhwc_kernel(w: KernelWriter, s: ConvGeometry, ptrs: tuple[str, str], m_text: str, cfg: dict[str, Any],
                 epi: list[str]) -> KernelSource:
    """The implicit GEMM over channels-last copies of the input ([N, *spatial, C]) and filter ([C_out, *taps,
    C_in/g]; transposed: [*taps, C_out/g, C_in]), made by the launcher: k runs over (tap, channel), so a tile's
    k columns are BLOCK_K consecutive channels of one tap (16-byte loads where NCHW gathers 4-byte ones), and
    each step's tap offset is one scalar added to the rows' window origins."""
    n = w.g.nodes[0]
    xptr, wptr = ptrs
    nd, cg = len(s.outs), s.cin_g
    bk = int(cfg.get("BLOCK_K", 32))
    bk = next(b for b in (bk, 32, 16) if cg % b == 0)
    pos = [cg * s.groups * _inner(s.ins, j) for j in range(nd)]  # NHWC stride of each spatial dim
    rows = [f"h{j} = " + _sum([_term(f"o{j}", 1 if s.transposed else s.stride[j]),
                                str(s.padding[j] if s.transposed else -s.padding[j]) if s.padding[j] else None]) +
            f"  # window origin along spatial dim {j}" for j in range(nd)]
    origin = ([_term("img", cg * s.groups * math.prod(s.ins))] if s.batch > 1 else []) + \
        [_term(f"h{j}", pos[j]) for j in range(nd)] + ([_term("grp", cg)] if s.groups > 1 else [])
    rows.append(f"xm = {_sum(origin)}  # NHWC address of each row's window origin (channel 0 of its group)")
    sign = -1 if s.transposed else 1
    step = ["t = k0 // " + str(cg) + "  # the filter tap of this step", f"c = k0 % {cg} + rk  # its input channels"]
    inner = 1
    conds = ["mmask[:, None]"]
    shift: list[str | None] = []
    for j in range(nd - 1, -1, -1):
        if s.kernel[j] > 1:
            step.append(f"t{j} = {'t' if inner == 1 else f'(t // {inner})'} % {s.kernel[j]}")
            shift.append(_term(f"t{j}", sign * s.dilation[j] * pos[j]))
            i, o, kk, st, p, d = s.ins[j], s.outs[j], s.kernel[j], s.stride[j], s.padding[j], s.dilation[j]
            low = (kk - 1) * d > p if s.transposed else p > 0
            high = (o - 1 + p >= i) if s.transposed else ((o - 1) * st - p + (kk - 1) * d >= i)
            if low or high:
                step.append(f"i{j} = h{j} {'-' if s.transposed else '+'} t{j} * {d}")
                conds += ([f"(i{j} >= 0)[:, None]"] if low else []) + ([f"(i{j} < {i})[:, None]"] if high else [])
        inner *= s.kernel[j]
    taps_w = s.cout_g * cg * s.groups if s.transposed else cg  # filter elements between consecutive taps
    wn = (f"rn * {cg * s.groups}" + (f" + grp * {cg}" if s.groups > 1 else "")) if s.transposed else \
        (f"(grp * {s.cout_g} + rn) * {s.taps * cg}" if s.groups > 1 else f"rn * {s.taps * cg}")
    wmask = ", mask=nmask[None, :], other=0.0" if s.cout_g % int(cfg.get("BLOCK_N", 64)) else ""
    loop = ["acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)", f"wn = {wn}  # filter address of each output channel",
            f"for k0 in range(0, K, BLOCK_K):"] + [f"    {ln}" for ln in step + [
                f"xa = tl.load({xptr} + xm[:, None] + ({_sum(shift + ['c'])})[None, :], mask={' & '.join(conds)}, "
                "other=0.0)",
                f"wb = tl.load({wptr} + wn[None, :] + ({_term('t', taps_w)} + c)[:, None]{wmask})",
                "# fp32 inputs: \"tf32x3\" (three tensor-core passes) or \"ieee\" keep fp32 accuracy; tf32 would not",
                "acc = tl.dot(xa, wb, acc, input_precision=PRECISION)"]]
    x_base, w_base = (w.bases.index(s.x[0]), w.bases.index(s.w[0]))
    order = ", ".join(["0", *(str(2 + j) for j in range(nd)), "1"])
    w_order = ", ".join([*(str(2 + j) for j in range(nd)), "1", "0"]) if s.transposed else order
    w.prep += [f"a{x_base} = a{x_base}.permute({order}).contiguous()  # channels-last copy of the input",
               f"a{w_base} = a{w_base}.permute({w_order}).contiguous()  # the filter with channels innermost"]
    body = _head_lines(s, w.idx64, m_text) + rows + loop + _tail(s, n) + epi
    title = (f"{_describe(s)}: implicit GEMM per group over channels-last copies, M = {m_text} (image x output "
             f"position), N = {s.cout_g} (output channels per group), K = {s.k} (filter taps x input channels per "
             f"group, channels innermost), fp32 accumulation with tensor-core dots (PRECISION), then "
             f"{len(w.g.nodes) - 1} fused ops.")
    tiles = (int(cfg.get("BLOCK_M", 128)), int(cfg.get("BLOCK_N", 64)), bk)
    return _gemm_source(w, title, s.k, body, f"(triton.cdiv({m_text}, {tiles[0]}) * triton.cdiv({s.cout_g}, "
                        f"{tiles[1]}), {s.groups})", tiles, cfg, "implicit-GEMM convolution, channels-last staging")


def _phase_kernel(w: KernelWriter, s: ConvGeometry, ptrs: tuple[str, str], tiles: tuple[int, int, int],
                  cfg: dict[str, Any], epi: list[str]) -> KernelSource:
    """A transposed convolution as one implicit GEMM per (group, output phase): grid axis 1 runs over both."""
    n = w.g.nodes[0]
    bm, bn, _ = tiles
    body, m_text, axis1, ktot = _phase_body(s, w, ptrs, w.lead is not None and w.lead.batched(n), bn)
    body += [f"v{n.id} = acc"] + epi
    title = (f"{_describe(s, phases=True)}: implicit GEMM per group and output phase (o % stride), M = {m_text} "
             f"(image x phase position), N = {s.cout_g} (output channels per group), K = {ktot} (input channels per "
             f"group x the taps that reach whole input positions), fp32 accumulation with tensor-core dots "
             f"(PRECISION), then {len(w.g.nodes) - 1} fused ops.")
    return _gemm_source(w, title, ktot, body, f"(triton.cdiv({m_text}, {bm}) * triton.cdiv({s.cout_g}, {bn}), "
                        f"{axis1})", tiles, cfg, "transposed convolution by output phases")


def _gemm_source(w: KernelWriter, title: str, k: int | str, body: list[str], grid: str,
                 tiles: tuple[int, int, int], cfg: dict[str, Any], what: str) -> KernelSource:
    """The kernel's source and its launcher, shared by the direct and the phase (transposed) forms."""
    name = w.name
    bm, bn, bk = tiles
    src = (f"@triton.jit\ndef {name}_kernel({w.signature(['BLOCK_M', 'BLOCK_N', 'BLOCK_K', 'PRECISION'])}):\n"
           f"{w.docstring(title)}\n    K = {k}\n" + "".join(f"    {ln}\n" for ln in body))
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "PRECISION": str(cfg.get("precision", "tf32x3")),
            "num_warps": int(cfg.get("num_warps", 8)), "num_stages": int(cfg.get("num_stages", 3))}
    launcher = w.launcher(grid, meta, f"Launch {name}_kernel: {what} + {len(w.g.nodes) - 1} fused epilogue ops.")
    return KernelSource(name, src, launcher, w.bases, list(w.g.outputs), w.helpers)


def _describe(s: ConvGeometry, phases: bool = False) -> str:
    kind = ("Transposed convolution (by output phases)" if phases else "Transposed convolution (gather form)") \
        if s.transposed else "Convolution"
    return (f"{kind} {len(s.outs)}-D of [{s.batch}, {s.cin_g * s.groups}, {', '.join(map(str, s.ins))}] -> "
            f"[{s.batch}, {s.cout}, {', '.join(map(str, s.outs))}], kernel {list(s.kernel)}, stride {list(s.stride)}, "
            f"padding {list(s.padding)}, dilation {list(s.dilation)}, groups {s.groups}")


# -- transposed convolutions by phases (sub-pixel decomposition) -----------------------------------------------
def _phase_dims(s: ConvGeometry) -> list[tuple[int, int, int, int]]:
    """Per spatial dim: (q, step, taps, dd). Output positions o = r + s * q fall into ``s`` phases r; in phase
    r only the taps t = t0(r) + u * step (step = s / gcd(s, d)) reach whole input positions, and input
    i = q + (r + p - t0 d) / s - u * dd (dd = d / gcd(s, d)). ``q`` positions per phase, ``taps`` = the most
    taps u per phase."""
    out = []
    for o, k, st, d in zip(s.outs, s.kernel, s.stride, s.dilation, strict=True):
        g = math.gcd(st, d)
        step = st // g
        out.append((-(-o // st), step, -(-k // step), d // g))
    return out


def _phase_head(s: ConvGeometry, i64: bool, m_text: str, dims: list[tuple[int, int, int, int]]) -> list[str]:
    """Program ids (axis 1: group x phase), rows (image, q...), the phase ``r{j}`` of each strided dim, its
    first tap ``f{j}`` (``K_j`` where no tap of the phase reaches the input) and input offset ``b{j}``."""
    cast = ".to(tl.int64)" if i64 else ""
    phases = math.prod(s.stride)
    lines = ["pid = tl.program_id(0)", f"pid1 = tl.program_id(1){cast}"]
    lines += [f"grp = pid1 // {phases}  # convolution group" if s.groups > 1 else "",
              f"ph = pid1 % {phases}  # output phase: o % stride along every dim" if phases > 1 else "",
              f"num_n = tl.cdiv({s.cout_g}, BLOCK_N)", "pid_m = pid // num_n", "pid_n = pid % num_n",
              f"rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)){cast}  # image * phase positions + phase position",
              "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel within the group",
              "rk = tl.arange(0, BLOCK_K)", f"nmask = rn < {s.cout_g}"]
    conds = [f"(rm < {m_text})"]
    inner, pin = 1, 1
    rows: list[str] = []
    for j in range(len(s.outs) - 1, -1, -1):
        q, step, _, _ = dims[j]
        st, p, d, k = s.stride[j], s.padding[j], s.dilation[j], s.kernel[j]
        qq = "rm" if inner == 1 else f"(rm // {inner})"
        rows.insert(0, f"q{j} = {qq} % {q}  # position within the phase along spatial dim {j}")
        inner *= q
        if st == 1:
            rows.insert(1, f"o{j} = q{j}")
            rows.insert(2, f"b{j} = {p}  # input = o + p - t * d")
            continue
        ph = "ph" if pin == 1 else f"(ph // {pin})"
        pin *= st
        off = st * (-(-step * d // st) + 1)  # keeps the numerators >= 0: % and // then agree with floor
        pick = [f"r{j} = {ph} % {st}  # phase along spatial dim {j}", f"f{j} = r{j} * 0 + {k}  # no tap yet"]
        for cand in range(step - 1, -1, -1):  # the one tap in [0, step) whose product lands on a whole position
            pick.append(f"f{j} = tl.where(((r{j} + {p + off - cand * d}) % {st}) == 0, {cand}, f{j})")
        boff = st * k * d
        pick.append(f"b{j} = (r{j} + {p + boff} - f{j} * {d}) // {st} - {boff // st}  # (r + p - t0 d) / s, exact")
        pick.append(f"o{j} = r{j} + q{j} * {st}  # output position")
        rows[1:1] = pick
        if s.outs[j] % st:
            conds.append(f"(o{j} < {s.outs[j]})")
    lines += rows
    if s.batch > 1:
        lines.append(f"img = rm // {inner}  # image")
    lines.append(f"mmask = {' & '.join(conds)}")
    return [ln for ln in lines if ln]


def _phase_addresses(s: ConvGeometry, dims: list[tuple[int, int, int, int]]) -> tuple[list[str], list[str]]:
    """(lines before the K loop: the per-row input origin ``xm`` and the filter's phase offset ``wt0``;
    lines inside it: the column split into channel ``c`` and taps ``u{j}``, column addresses and masks)."""
    xs, (ws, woff) = s.x[1], (s.w[1], s.w[2])
    terms = ([_term("img", xs[0])] if s.batch > 1 else []) + ([_term("grp", s.cin_g * xs[1])] if s.groups > 1 else [])
    for j in range(len(s.outs)):
        terms.append(_term(f"(q{j} + b{j})", xs[2 + j]))
    if s.x[2]:
        terms.append(str(s.x[2]))
    pre = [f"xm = {_sum(terms)}  # input address of each row's first tap", "wt0 = " + _sum(
        [_term(f"f{j}", ws[2 + j]) for j in range(len(s.outs)) if s.stride[j] > 1] +
        ([_term("grp", s.cin_g * ws[0])] if s.groups > 1 else []) + ([str(woff)] if woff else []) + ["rn * 0"]) +
        "  # filter address of the phase's first taps"]
    taps = math.prod(t for _, _, t, _ in dims)
    loop = ["k = k0 + rk", f"c = k // {taps}  # input channel within the group" if taps > 1 else "c = k"]
    inner = 1
    xk: list[str | None] = [_term("c", xs[1])]
    wk: list[str | None] = [_term("c", ws[0])]
    kconds = ["(k < K)"]
    for j in range(len(s.outs) - 1, -1, -1):
        _, step, t, dd = dims[j]
        if t == 1:
            continue
        q = "k" if inner == 1 else f"(k // {inner})"
        loop.append(f"u{j} = {q} % {t}  # tap of the phase along spatial dim {j}")
        inner *= t
        xk.append(_term(f"u{j}", -dd * xs[2 + j]))
        wk.append(_term(f"u{j}", step * ws[2 + j]))
        if s.stride[j] > 1:  # t0 + u * step may pass the filter's end (or the phase has no tap: t0 = K)
            kconds.append(f"(f{j} + u{j} * {step} < {s.kernel[j]})")
    for j in range(len(s.outs)):
        if s.stride[j] > 1 and dims[j][2] == 1:
            kconds.append(f"(f{j} + k * 0 < {s.kernel[j]})")  # a block: the mask must be one
    loop += [f"xk = {_sum(xk)}", f"wk = {_sum(wk)}", f"kmask = {' & '.join(kconds)}"]
    conds = ["mmask[:, None]", "kmask[None, :]"]
    for j in range(len(s.outs)):
        dd, t = dims[j][3], dims[j][2]
        shift = _term(f"u{j}[None, :]", dd) if t > 1 else None
        loop.append(f"i{j} = (q{j} + b{j})[:, None]" + (f" - {shift}" if shift else "") +
                    f"  # input position along spatial dim {j}")
        conds += [f"(i{j} >= 0)", f"(i{j} < {s.ins[j]})"]
    loop.append(f"amask = {' & '.join(conds)}")
    return pre, loop


def _phase_body(s: ConvGeometry, w: KernelWriter, ptrs: tuple[str, str], batched: bool,
                bn: int) -> tuple[list[str], str, int, int]:
    """Kernel lines up to the accumulator of a transposed convolution by phases: (lines, rows as text, grid
    axis 1, K per phase)."""
    dims = _phase_dims(s)
    rows = s.batch * math.prod(q for q, _, _, _ in dims)
    m_text = w.size(rows, batched)
    pre, loop = _phase_addresses(s, dims)
    ktot = s.cin_g * math.prod(t for _, _, t, _ in dims)
    xptr, wptr = ptrs
    wmask = "kmask[:, None]" + (" & nmask[None, :]" if s.cout_g % bn else "")
    body = _phase_head(s, w.idx64, m_text, dims) + pre + [
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        f"wn = wt0 + rn * {s.w[1][1]}  # filter address of each output channel",
        "for k0 in range(0, K, BLOCK_K):"] + [f"    {ln}" for ln in loop] + [
        f"    xa = tl.load({xptr} + xm[:, None] + xk[None, :], mask=amask, other=0.0)",
        f"    wb = tl.load({wptr} + wk[:, None] + wn[None, :], mask={wmask}, other=0.0)",
        "    # fp32 inputs: \"tf32x3\" (three tensor-core passes) or \"ieee\" keep fp32 accuracy; tf32 would not",
        "    acc = tl.dot(xa, wb, acc, input_precision=PRECISION)"]
    sp = _sum([_term(f"o{j}", math.prod(s.outs[j + 1:])) for j in range(len(s.outs))])
    co = "grp * {} + rn".format(s.cout_g) if s.groups > 1 else "rn"
    body += [f"co = {co}  # output channel", f"sp = {sp}  # output position",
             (f"lin = (img[:, None] * {s.cout} + co[None, :]) * {s.positions} + sp[:, None]" if s.batch > 1
              else f"lin = co[None, :] * {s.positions} + sp[:, None]"),
             "mask = mmask[:, None] & nmask[None, :]"]
    return body, m_text, s.groups * math.prod(s.stride), ktot
