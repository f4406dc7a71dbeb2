"""Matmul kernels: a (batched) matmul with the elementwise chain after it fused into its epilogue.

Grouped tile order (GROUP_M row tiles share a column tile of B in L2), fp32 accumulation through
tensor-core dots whose precision keeps fp32 accuracy ("tf32x3" or "ieee"), or operands staged first
into zero-padded scratch (``mm-aligned``) or split into tf32 hi/lo parts (``mm-3xtf32``).
"""

from __future__ import annotations

__all__ = ["MatmulShapes", "matmul_kernel", "mm_shapes"]

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from tritonsmith.agents.builtin._exprs import broadcast_strides
from tritonsmith.agents.builtin._ir import Node
from tritonsmith.agents.builtin._kernelbase import KernelSource, KernelWriter
from tritonsmith.agents.builtin._partition import FULL, Group, Plan, layout
from tritonsmith.agents.builtin._shapes import NotGeneric, mm_roles

_SWIZZLE = """    pid = tl.program_id(0)
    bid = tl.program_id(1){i64}
    # grouped launch order: GROUP_M row tiles share each column tile of B while it is in L2
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_n
    first_m = (pid // in_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % size_m
    pid_n = (pid % in_group) // size_m
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)){i64}
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)){i64}
    rk = tl.arange(0, BLOCK_K)
"""


@dataclass
class MatmulShapes:
    """Shapes and operand layouts of one (batched) matmul group."""

    bsz: int
    m: int
    n: int
    k: int
    # base, (batch, m, k) strides, offset (in the kernel: text where they hold the leading size, ``_held_layouts``)
    a: tuple[Node, tuple[Any, ...], Any]
    b: tuple[Node, tuple[Any, ...], Any]  # base, (batch, k, n) strides, offset


def mm_shapes(plan: Plan, g: Group) -> MatmulShapes:
    mm = g.nodes[0]
    a, b = mm.args
    batched = len(mm.shape) == 3
    bsz = mm.shape[0] if batched else 1
    m, n, k = mm.shape[-2], mm.shape[-1], a.shape[-1]
    (abase, ast, aoff), (bbase, bst, boff) = layout(a, plan.owner), layout(b, plan.owner)
    sa = broadcast_strides(a.shape, ast, (bsz, m, k)) if batched else (0, *ast)
    sb = broadcast_strides(b.shape, bst, (bsz, k, n)) if batched else (0, *bst)
    return MatmulShapes(bsz, m, n, k, (abase, tuple(sa), aoff), (bbase, tuple(sb), boff))


def matmul_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    w = KernelWriter(plan, g, name)
    mm = g.nodes[0]
    s = mm_shapes(plan, g)
    bm, bn, bk = int(cfg.get("BLOCK_M", 128)), int(cfg.get("BLOCK_N", 128)), int(cfg.get("BLOCK_K", 32))
    prec = str(cfg.get("precision", "tf32x3"))
    if prec == "3xtf32" and not (mm.args[0].dtype == mm.args[1].dtype == torch.float32):
        prec = "tf32x3"  # the hi/lo split is written for fp32 operands
    ap, bp = w.base_ptr(s.a[0]), w.base_ptr(s.b[0])
    w.check_size(s.bsz * s.m * s.n)
    epi: list[str] = []
    cache: dict[Any, str] = {}
    for node in g.nodes[1:]:
        w.pointwise_line(node, epi, cache)
    epi += [w.store(o, FULL) for o in g.outputs]
    i64 = ".to(tl.int64)" if w.idx64 else ""
    head = _SWIZZLE.format(i64=i64)
    kp = -(-s.k // bk) * bk
    pad = bool(cfg.get("pad")) and prec != "3xtf32"
    # shape-generic: which size follows the leading one (a linear layer's M, a batched matmul's batch, the
    # contracted K of ``A.T @ B``, ...); the others stay literals
    role = mm_roles(mm, w.lead) if w.lead is not None else ""
    m_text, n_text, k_text = w.size(s.m, role == "m"), w.size(s.n, role == "n"), w.size(s.k, role == "k")
    b_text = w.size(s.bsz, role == "batch")
    if (pad or prec == "3xtf32") and role in ("n", "k"):
        raise NotGeneric(f"the staging kernels of zero-padded or tf32 hi/lo operands take {role.upper()} as a "
                         "compile-time size")
    s = _held_layouts(w, mm, s, staged=pad or prec == "3xtf32")
    # the staged operands' padded row count: a literal, or computed from M in the kernel when M follows
    mp_text = str(_staged_dims(s, bm, bn, kp)[0]) if role != "m" else "(tl.cdiv(M, BLOCK_M) * BLOCK_M)"
    if prec == "3xtf32":
        loop, extra = _split3_loop(s, (bm, bn, kp), mp_text), ("wa_ptr", "wb_ptr")
        what = ("3xTF32: operands pre-split into tf32 hi + lo parts (zero-padded, aligned); C = A_hi B_lo + "
                "A_lo B_hi + A_hi B_hi as one tf32 tensor-core dot over K' = 3 K, fp32 accumulation")
    elif pad:
        loop, extra = _padded_loop(s, (bm, bn, kp), mp_text, _zero_tiles(mm, str(kp))), ("wa_ptr", "wb_ptr")
        what = "fp32 accumulation, operands first copied into zero-padded buffers with aligned rows"
    else:
        loop = _direct_loop(s, ap, bp, bk, _zero_tiles(mm, "K"), k_masked=role == "k")
        extra, what = (), "fp32 accumulation"
    if mm.attrs.get("tri") and prec != "3xtf32":
        what += f"; only the {mm.attrs['tri'][0]} triangle is kept: tiles wholly outside it skip the K loop"
    title = f"C[b] = A[b] @ B[b] ({s.bsz} x {s.m}x{s.k} @ {s.k}x{s.n}, {what}) with the elementwise chain fused after it."
    src = (f"@triton.jit\ndef {name}_kernel("
           f"{w.signature(['BLOCK_M', 'BLOCK_N', 'BLOCK_K', 'GROUP_M', 'PRECISION'], extra)}):\n"
           f"{w.docstring(title)}\n"
           f"    M, N, K = {m_text}, {n_text}, {k_text}\n" + head + loop +
           "    mask = (rm[:, None] < M) & (rn[None, :] < N)\n"
           "    lin = bid * (M * N) + rm[:, None] * N + rn[None, :]\n" + _tri_mask(mm) +
           f"    v{mm.id} = acc\n" + "".join(f"    {line}\n" for line in epi))
    grid = f"(triton.cdiv({m_text}, {bm}) * triton.cdiv({n_text}, {bn}), {b_text})"
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": int(cfg.get("GROUP_M", 8)),
            "PRECISION": "tf32" if prec == "3xtf32" else prec, "num_warps": int(cfg.get("num_warps", 8)),
            "num_stages": int(cfg.get("num_stages", 3))}
    comment = f"Launch {name}_kernel: matmul + {len(g.nodes) - 1} fused epilogue ops."
    if prec != "3xtf32" and not pad:
        return KernelSource(name, src, w.launcher(grid, meta, comment), w.bases, list(g.outputs), w.helpers)
    helper = "_pad_copy_kernel" if pad else "_tf32_split_kernel"
    launcher = _staged_launcher(w, s, helper, (bm, bn, bk), (b_text, m_text), (f"{name}_kernel", grid, meta),
                                comment)
    helpers = {helper} | ({_ROWS_AT_RUN_TIME[helper]} if m_text != str(s.m) else set())
    return KernelSource(name, src, launcher, w.bases, list(g.outputs), w.helpers | helpers)


def _held_layouts(w: KernelWriter, mm: Node, s: MatmulShapes, staged: bool) -> MatmulShapes:
    """``s`` with each operand's strides and offset as ``KernelWriter.lead_layout`` writes them where the kernel
    is shape-generic: a view whose stride holds the leading size (attention's ``v`` as ``[B * H, L, d]`` of a
    ``[L, B * H, d]`` tensor) indexes with it at run time. The staging kernels take them as literals."""
    if w.lead is None:
        return s
    batched = len(mm.shape) == 3
    held = []
    for node, (base, strides, off), use in ((mm.args[0], s.a, (s.bsz, s.m, s.k)), (mm.args[1], s.b, (s.bsz, s.k, s.n))):
        if batched:
            st, o = w.lead_layout(node, use, strides, off)
        else:
            st2, o = w.lead_layout(node, use[1:], strides[1:], off)
            st = (0, *st2)
        held.append((base, st, o))
    if (held[0][1:], held[1][1:]) == ((s.a[1], s.a[2]), (s.b[1], s.b[2])):
        return s
    if staged:
        raise NotGeneric("the staging kernels of zero-padded or tf32 hi/lo operands take their strides as "
                         "literals, and one holds the leading size")
    return dataclasses.replace(s, a=held[0], b=held[1])


def _zero_tiles(mm: Node, full: str) -> tuple[str, str]:
    """(lines before the K loop, its end). For a matmul whose output only ``tril``/``triu`` reads
    (``mm.attrs['tri']`` = (lower|upper, diagonal), set by ``_rewrite.triangular_matmul``) the end is 0 for a
    tile wholly outside the kept triangle (the epilogue's mask zeroes all its values: no product is needed),
    else ``full``; for any other matmul it is ``full``."""
    tri = mm.attrs.get("tri")
    if not tri:
        return "", full
    kind, diag = tri
    # output (i, j) is kept when j - i <= diag (lower) or j - i >= diag (upper)
    outside = (f"pid_n * BLOCK_N - (pid_m * BLOCK_M + BLOCK_M - 1) > {diag}" if kind == "lower" else
               f"pid_n * BLOCK_N + BLOCK_N - 1 - pid_m * BLOCK_M < {diag}")
    return (f"    # {kind}-triangular output: a tile wholly outside the triangle is zero, its products skipped\n"
            f"    k_stop = tl.where({outside}, 0, {full})\n"), "k_stop"


def _tri_mask(mm: Node) -> str:
    """The ``tril``/``triu`` mask of a marked matmul (``_zero_tiles``): zero outside the kept triangle."""
    tri = mm.attrs.get("tri")
    if not tri:
        return ""
    op, fn = ("<=", "tril") if tri[0] == "lower" else (">=", "triu")
    return f"    acc = tl.where(rn[None, :] - rm[:, None] {op} {tri[1]}, acc, 0.0)  # torch.{fn}(C, {tri[1]})\n"


def _direct_loop(s: MatmulShapes, ap: str, bp: str, bk: int, stop: tuple[str, str] = ("", "K"),
                 k_masked: bool = False) -> str:
    """The K loop on the operands in place; ``k_masked``: K is a run-time size (masks whatever it is)."""
    (sab, sam, sak), aoff = s.a[1], s.a[2]
    (sbb, sbk, sbn), boff = s.b[1], s.b[2]
    kmask = s.k % bk != 0 or k_masked
    a_mask = "(rm[:, None] < M) & (rk[None, :] < K - k0)" if kmask else "rm[:, None] < M"
    b_mask = "(rk[:, None] < K - k0) & (rn[None, :] < N)" if kmask else "rn[None, :] < N"
    return f"""    a_ptrs = {ap} + {aoff} + bid * {sab} + rm[:, None] * {sam} + rk[None, :] * {sak}
    b_ptrs = {bp} + {boff} + bid * {sbb} + rk[:, None] * {sbk} + rn[None, :] * {sbn}
{stop[0]}    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, {stop[1]}, BLOCK_K):
        a = tl.load(a_ptrs, mask={a_mask}, other=0.0)
        b = tl.load(b_ptrs, mask={b_mask}, other=0.0)
        # fp32 inputs: "tf32x3" (three tensor-core passes) or "ieee" keep fp32 accuracy; plain tf32 would not
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * {sak}
        b_ptrs += BLOCK_K * {sbk}
"""


def _staged_dims(s: MatmulShapes, bm: int, bn: int, kp: int) -> tuple[int, int, int, int]:
    """(padded M, padded N, batches of the staged A, batches of the staged B): the scratch both stagings fill."""
    mp, np_ = -(-s.m // bm) * bm, -(-s.n // bn) * bn
    return mp, np_, (s.bsz if s.a[1][0] else 1), (s.bsz if s.b[1][0] else 1)


def _times(text: str, k: int) -> str:
    """``text * k`` as kernel text: the product itself where ``text`` is a literal."""
    return str(int(text) * k) if text.isdigit() else f"{text} * {k}"


def _split3_loop(s: MatmulShapes, tiles: tuple[int, int, int], mp: str) -> str:
    """The K' loop over the hi/lo scratch; ``mp``: its padded row count (a literal, or kernel text)."""
    bm, bn, kp = tiles
    _, np_, ba, bb = _staged_dims(s, bm, bn, kp)
    sa = f"bid * {_times(mp, 2 * kp)} + " if ba > 1 else ""
    sb = f"bid * {2 * kp * np_} + " if bb > 1 else ""
    return f"""    # wa = [A_hi | A_lo] ({mp} x {2 * kp} per batch), wb = [B_hi; B_lo] ({2 * kp} x {np_}): padded, no masks.
    # K' walks three regions of {kp}: A_hi B_lo, A_lo B_hi, then A_hi B_hi (small products first).
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, {3 * kp}, BLOCK_K):
        part = k0 // {kp}
        kk = k0 % {kp} + rk
        ka = kk + (part == 1).to(tl.int32) * {kp}
        kb = kk + (part == 0).to(tl.int32) * {kp}
        a = tl.load(wa_ptr + {sa}rm[:, None] * {2 * kp} + ka[None, :])
        b = tl.load(wb_ptr + {sb}kb[:, None] * {np_} + rn[None, :])
        # PRECISION is "tf32" here: hi and lo are exact tf32 values (lo cut by the core: <= 2^-22 |x|),
        # so the three products reproduce fp32 accuracy (3xTF32, as CUTLASS); the evaluator checks it vs float64
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
"""


def _padded_loop(s: MatmulShapes, tiles: tuple[int, int, int], mp: str,
                 stop: tuple[str, str] | None = None) -> str:
    """The K loop over zero-padded scratch; ``mp``: its padded row count (a literal, or kernel text)."""
    bm, bn, kp = tiles
    stop = stop or ("", str(kp))
    _, np_, ba, bb = _staged_dims(s, bm, bn, kp)
    sa = f"bid * {_times(mp, kp)} + " if ba > 1 else ""
    sb = f"bid * {kp * np_} + " if bb > 1 else ""
    return f"""    # wa ({mp} x {kp} per batch) and wb ({kp} x {np_}): zero-padded copies whose rows start on 16-element
    # boundaries, so each tile moves in 16-byte pieces and no load needs a mask (the zeros add nothing)
    a_ptrs = wa_ptr + {sa}rm[:, None] * {kp} + rk[None, :]
    b_ptrs = wb_ptr + {sb}rk[:, None] * {np_} + rn[None, :]
{stop[0]}    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, {stop[1]}, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        # fp32 inputs: "tf32x3" (three tensor-core passes) or "ieee" keep fp32 accuracy; plain tf32 would not
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * {np_}
"""


# the staging helpers with the row count R (and its padded RP) as run-time arguments: A's, when M follows
# the leading size (the literal forms stay for every size fixed: one compile each, as measured)
_ROWS_AT_RUN_TIME = {"_pad_copy_kernel": "_pad_copy_rows_kernel", "_tf32_split_kernel": "_tf32_split_rows_kernel"}


def _staged_launcher(w: KernelWriter, s: MatmulShapes, helper: str, tiles: tuple[int, int, int],
                     sizes: tuple[str, str], main: tuple[str, str, dict[str, Any]], comment: str) -> str:
    """Stage both operands into zero-padded scratch with ``helper`` (``_tf32_split_kernel``: hi/lo parts,
    twice the width; ``_pad_copy_kernel``: a plain copy), then launch the matmul on the scratch. ``sizes``:
    the batch and M as launcher text (a batched operand's scratch then holds as many batches as the call;
    where M follows the leading size, A's scratch has as many padded rows as the call needs)."""
    bm, bn, bk = tiles
    b_text, m_text = sizes
    kp = -(-s.k // bk) * bk
    mp, np_, ba_i, bb_i = _staged_dims(s, bm, bn, kp)
    ba = b_text if ba_i > 1 and b_text != str(s.bsz) else ba_i
    bb = b_text if bb_i > 1 and b_text != str(s.bsz) else bb_i
    rows_rt = m_text != str(s.m)
    mp_t = f"triton.cdiv({m_text}, {bm}) * {bm}" if rows_rt else str(mp)
    args = [f"a{w.bases.index(s.a[0])}", f"a{w.bases.index(s.b[0])}"]
    (sab, sam, sak), (sbb, sbk, sbn) = s.a[1], s.b[1]
    pre, parts = 64, 2 if helper == "_tf32_split_kernel" else 1
    split_a = {"ROWS": False} if parts == 2 else {}
    split_b = {"ROWS": True} if parts == 2 else {}
    rows_a: dict[str, int | str] = {} if rows_rt else {"R": s.m}
    stage_a = {"OFF": s.a[2], "SB": sab, "SR": sam, "SC": sak, **rows_a, "C": s.k, **({} if rows_rt else {"RP": mp}),
               "CP": kp, **split_a, "BLOCK_R": pre, "BLOCK_C": pre}
    stage_b = {"OFF": s.b[2], "SB": sbb, "SR": sbk, "SC": sbn, "R": s.k, "C": s.n, "RP": kp, "CP": np_, **split_b,
               "BLOCK_R": pre, "BLOCK_C": pre}
    launches = [(_ROWS_AT_RUN_TIME[helper] if rows_rt else helper,
                 f"(triton.cdiv({mp_t}, {pre}), triton.cdiv({kp}, {pre}), {ba})", stage_a),
                (helper, f"(triton.cdiv({kp}, {pre}), triton.cdiv({np_}, {pre}), {bb})", stage_b),
                main]
    workspace = {"wa": ((ba, mp_t if rows_rt else mp, parts * kp), "torch.float32"),
                 "wb": ((bb, parts * kp, np_), "torch.float32")}
    what = " Operands are split into tf32 hi/lo parts first." if parts == 2 else \
        " Operands are copied into aligned, zero-padded scratch first."
    own_a = [args[0], "wa", m_text, mp_t] if rows_rt else [args[0], "wa"]
    return w.launcher_multi(launches, comment + what, workspace, {0: own_a, 1: [args[1], "wb"]})
