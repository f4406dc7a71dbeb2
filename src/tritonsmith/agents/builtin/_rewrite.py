"""Algebraic rewrites of the traced graph, between lowering and partitioning.

Each rewrite is a small function named after what it makes, whose docstring gives the identity it relies
on. It fires only where its pattern matches exactly (operation, shapes, dtypes, dimensions, and no other
reader of the values it removes), and edits the graph in place: new nodes are built through the lowering's
builders (``_ir.Lowering``: the same shape rules and strides as the lowering), the readers of the replaced
value are re-pointed, and the graph is put back in topological order. The replaced nodes stay in the list
but nothing reads them, so the partitioner (which places only live nodes) never sees them.

Pre-reduced weights are graph nodes like any other: the candidate computes them from the module's
parameters on every call (a row kernel over the weights, O(weights)), never caches them across calls.
None of this is assumed correct: the evaluator compares every candidate with the reference, and the
variant menu ends with ``no-rewrites``, the same pipeline with this pass off.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
import torch

from tritonsmith.agents.builtin._ir import (CONV, EXTERN, INPUT, MM, PARAM, PW, REDUCE, SCAN, VIEW, WINDOW, Graph,
                                            Lowering, Node, is_elementwise, is_fill)

__all__ = ["REWRITES", "rewrite"]


def rewrite(lw: Lowering) -> list[str]:
    """Apply every rewrite of :data:`REWRITES` to ``lw.g`` until none matches; the names of those that fired,
    in the order of :data:`REWRITES`."""
    fired: list[str] = []
    for name, rule in REWRITES:
        hits = 0
        while rule(lw, _Uses(lw.g)):
            _reorder(lw.g)
            hits += 1
            if hits > len(lw.g.nodes):  # each hit kills a matched node: matching forever is our bug
                raise RuntimeError(f"rewrite {name} does not terminate")
        if hits:
            fired.append(name)
    return fired


# -- graph edits ---------------------------------------------------------------------------------
class _Uses:
    """The live nodes (those the outputs depend on), in order, and the live readers of each (graph outputs
    count as a reader that cannot be rewritten). Replaced nodes are dead: no rewrite sees them again."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        live: set[int] = set()
        stack = list(g.outputs)
        while stack:
            n = stack.pop()
            if n.id not in live:
                live.add(n.id)
                stack.extend(n.node_args())
        self.live = [n for n in g.nodes if n.id in live]
        self.users: dict[int, list[Node]] = {n.id: [] for n in self.live}
        for n in self.live:
            for a in n.node_args():
                self.users[a.id].append(n)
        self.outputs = {o.id for o in g.outputs}

    def only_reader(self, n: Node, reader: Node) -> bool:
        """``reader`` is the one node reading ``n``, and ``n`` is not an output."""
        users = self.users.get(n.id, [])
        return n.id not in self.outputs and len(users) == 1 and users[0] is reader

    def replace(self, old: Node, new: Node) -> None:
        """Every reader of ``old`` (and the graph's outputs) reads ``new`` instead."""
        for u in self.users.get(old.id, []):
            u.args = tuple(new if a is old else a for a in u.args)
        self.g.outputs = [new if o is old else o for o in self.g.outputs]


def _reorder(g: Graph) -> None:
    """Topological order again (new nodes were appended after their readers), ids renumbered; the relative
    order of independent nodes is kept, so the partitioner places them as before."""
    order: list[Node] = []
    seen: set[int] = set()
    for root in g.nodes:
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((a, False) for a in reversed(n.node_args()) if id(a) not in seen)
    for i, n in enumerate(order):
        n.id = i
    g.nodes = order


# -- patterns ------------------------------------------------------------------------------------
def _linear(y: Node, uses: _Uses) -> tuple[Node, Node | None] | None:
    """``y`` is ``x @ B`` or ``x @ B + bias`` (2-D fp32, ``bias`` of shape (N,) or (1, N)) whose matmul has
    no other reader: (matmul, bias)."""
    mm, bias = y, None
    if y.kind == PW and y.op == "add" and len(y.args) == 2 and all(isinstance(a, Node) for a in y.args):
        a, b = y.args
        mm, bias = (a, b) if a.kind == MM else (b, a)
        n = y.shape[-1] if y.shape else 0
        if bias.shape not in ((n,), (1, n)) or bias.dtype != y.dtype or not uses.only_reader(mm, y):
            return None
    if mm.kind != MM or len(mm.shape) != 2 or mm.shape != y.shape:
        return None
    if not all(isinstance(a, Node) and a.dtype == torch.float32 for a in (*mm.args, y)):
        return None
    return mm, bias


def _pooled_columns(lw: Lowering, b: Node, windows: int, size: int, scale: float) -> Node:
    """``scale * sum`` over ``windows`` runs of ``size`` adjacent columns of ``b`` [K, N]: [K, windows].

    A linear layer's ``b`` is its weight [N, K] transposed: the rows of the weight are summed (reading it
    in its own order), and the result is transposed back as a view."""
    if b.kind == VIEW and b.attrs.get("how") == "permute" and len(b.args[0].shape) == 2:
        w = b.args[0]  # [N, K], row j is column j of b
        rows = _leading(lw, w, 0, windows * size)
        total = lw.reduce("sum", lw.view(rows, (windows, size, w.shape[1])), (1,), False)
        total = total if scale == 1.0 else lw.pw("mul", total, scale)
        return lw.permute(total, [1, 0])
    cols = _leading(lw, b, 1, windows * size)
    total = lw.reduce("sum", lw.view(cols, (b.shape[0], windows, size)), (2,), False)
    return total if scale == 1.0 else lw.pw("mul", total, scale)


def _pooled_vector(lw: Lowering, v: Node, windows: int, size: int, scale: float) -> Node:
    """``scale * sum`` over ``windows`` runs of ``size`` adjacent elements of the last dim of ``v``: [windows]."""
    flat = lw.view(v, (v.shape[-1],))
    total = lw.reduce("sum", lw.view(_leading(lw, flat, 0, windows * size), (windows, size)), (1,), False)
    return total if scale == 1.0 else lw.pw("mul", total, scale)


def _leading(lw: Lowering, x: Node, dim: int, n: int) -> Node:
    """The first ``n`` entries of ``x`` along ``dim`` (a slice view; ``x`` itself when that is all of it)."""
    if x.shape[dim] == n:
        return x
    shape = tuple(n if d == dim else s for d, s in enumerate(x.shape))
    cut = (slice(None),) * dim + (slice(0, n),)
    return lw._view_like(x, shape, "slice", lambda t: t[cut], dim=dim, start=0, end=n, step=1)


def _linear_of_pooled(lw: Lowering, mm: Node, bias: Node | None, windows: int, size: int, scale: float) -> Node:
    """``x @ P + pb`` [M, windows] where ``P``/``pb`` pool ``mm``'s right operand / ``bias`` over runs of
    ``size`` output features; one window is a matrix-vector product, written as a row reduction."""
    x, b = mm.args
    pooled = _pooled_columns(lw, b, windows, size, scale)
    if windows == 1:  # x @ w for a vector w: one pass over x, no 16-wide tile wasted on one column
        out = lw.reduce("sum", lw.pw("mul", x, lw.view(pooled, (1, x.shape[1]))), (1,), True)
    else:
        out = lw.mm(x, pooled)
    if bias is not None:
        out = lw.pw("add", out, _pooled_vector(lw, bias, windows, size, scale))
    return out


# -- the rewrites --------------------------------------------------------------------------------
def gemv_of_reduced_weights(lw: Lowering, uses: _Uses) -> bool:
    """``(x @ W^T + b).sum(-1, keepdim=True) == x @ W.sum(0) + b.sum()``.

    A sum (or a mean: a sum, then the division, which stays) over the output features of a linear layer or
    a matmul is a matrix-vector product with the weights summed over the output features first: one pass
    over ``x`` and one over ``W`` instead of an M x N x K GEMM. Multiplies / divides by a number and adds of
    a number or of a vector over the features between the product and the sum commute with it (a number
    added N times, a vector summed). Matches a 2-D fp32 matmul (+ a bias of shape (N,)) whose output only
    that chain reads, each value of the chain read only by the next."""
    for r in uses.live:
        if r.kind != REDUCE or r.op != "sum" or r.dims != (1,) or len(r.shape) != 2:
            continue
        found = _feature_chain(r.args[0], r, uses)
        if found is None or found[0][0].shape[1] < 2:
            continue
        (mm, bias), chain = found
        n = mm.shape[1]
        total = _linear_of_pooled(lw, mm, bias, 1, n, 1.0)
        for how, arg in reversed(chain):  # innermost (next to the product) first
            if isinstance(arg, Node):  # a vector over the features, summed: [1, 1]
                arg = lw.reduce("sum", lw.view(arg, (1, n)), (1,), True)
            elif how in ("add", "sub"):
                arg = arg * n
            total = lw.pw(how, total, arg)
        uses.replace(r, total)
        return True
    return False


def _feature_chain(y: Node, reader: Node, uses: _Uses) -> tuple[tuple[Node, Node | None], list[tuple[str, Any]]] | None:
    """((matmul, bias), chain) when ``y`` is a linear layer or matmul (:func:`_linear`) under multiplies /
    divides by a number and adds / subtracts of a number or of a vector over the features ((N,) or (1, N)),
    each value read only by the next: the chain as (op, number or vector) from ``y`` inward."""
    def feature_vector(b: Node, shape: tuple[int, ...]) -> bool:
        return b.shape in ((shape[1],), (1, shape[1])) and b.dtype == torch.float32

    return _chain_to(y, reader, uses, lambda n: _linear(n, uses), feature_vector, ("add", "sub"))


def _chain_to(y: Node, reader: Node, uses: _Uses, end: Callable[[Node], Any],
              tensor_ok: Callable[[Node, tuple[int, ...]], bool],
              tensor_ops: tuple[str, ...]) -> tuple[Any, list[tuple[str, Any]]] | None:
    """(``end(v)``, chain) for the first value ``v`` under ``y`` where ``end`` is not None, reached through
    multiplies / divides by a number, adds / subtracts of a number, and ``tensor_ops`` with a tensor that
    ``tensor_ok`` accepts (for the value's shape), each value read only by the next: the chain as
    (op, number or tensor) from ``y`` inward; None where anything else comes first."""
    chain: list[tuple[str, Any]] = []
    cur = y
    while uses.only_reader(cur, reader) and cur.dtype == torch.float32:
        found = end(cur)
        if found is not None:
            return found, chain
        scaled = _scalar_of(cur)
        if scaled is not None:
            chain.append((scaled[1], scaled[2]))
            cur, reader = scaled[0], cur
            continue
        if cur.kind != PW or cur.op not in ("add", "sub", "mul", "div") or len(cur.args) != 2 \
                or cur.attrs.keys() - {"bias_of"}:
            return None
        a, b = cur.args
        if cur.op in ("add", "mul") and not (isinstance(a, Node) and a.shape == cur.shape):
            a, b = b, a
        term = (cur.op in tensor_ops and tensor_ok(b, cur.shape)) if isinstance(b, Node) else \
            cur.op in ("add", "sub") and isinstance(b, (int, float)) and not isinstance(b, bool)
        if not isinstance(a, Node) or a.shape != cur.shape or not term:
            return None
        chain.append((cur.op, b))
        cur, reader = a, cur
    return None


def linear_of_pooled_weights(lw: Lowering, uses: _Uses) -> bool:
    """``avg_pool(x @ W^T + b, k)[:, j] == x @ mean(W[jk:(j+1)k], 0) + mean(b[jk:(j+1)k])``.

    Average pooling over the output features of a linear layer (``avg_pool1d(y.unsqueeze(1))``) is a
    linear layer with ``N / k`` outputs whose weights and bias are the pooled ones: a GEMM k times smaller,
    plus one pass over ``W``. Matches a window of stride = kernel = k over the last dim only, no padding, no
    partial window (floor mode drops the tail, as the pooling does), reading the linear's output through
    views that only add or drop size-1 dims; the pooled weights are scaled by ``1 / divisor``."""
    for wn in uses.live:
        if wn.kind != WINDOW or wn.op != "avg":
            continue
        k, s, p = wn.attrs["kernel"], wn.attrs["stride"], wn.attrs["padding"]
        if any((k[i], s[i], p[i]) != (1, 1, 0) for i in range(len(k) - 1)) or k[-1] != s[-1] or p[-1] != 0 \
                or k[-1] < 2:
            continue
        if any(d != 1 for d in wn.attrs.get("dilation", ())):
            continue
        y = _under_unit_views(wn, uses)
        lin = _linear(y, uses) if y is not None else None
        if lin is None or y is None or wn.args[0].shape[-1] != y.shape[1] or not _unit_dims_only(wn.shape, y.shape[0]):
            continue
        windows, size = wn.shape[-1], k[-1]
        if windows != y.shape[1] // size:  # ceil mode's partial last window averages fewer features
            continue
        divisor = wn.attrs.get("divisor_override") or size
        out = _linear_of_pooled(lw, lin[0], lin[1], windows, size, 1.0 / divisor)
        uses.replace(wn, lw.view(out, wn.shape))
        return True
    return False


def _under_unit_views(wn: Node, uses: _Uses) -> Node | None:
    """The value ``wn`` reads through reshapes that only add or drop size-1 dims, each value of the chain
    read by nothing else; None when the chain does anything else."""
    reader, x = wn, wn.args[0]
    while True:
        if not uses.only_reader(x, reader):
            return None
        if x.kind != VIEW:
            return x
        if x.attrs.get("how") != "reshape" or [d for d in x.shape if d != 1] != [d for d in x.args[0].shape if d != 1]:
            return None
        reader, x = x, x.args[0]


def _unit_dims_only(shape: tuple[int, ...], m: int) -> bool:
    """``shape`` is (1, ..., m, 1, ..., windows) up to size-1 dims: the rows, then the pooled features."""
    return [d for d in shape[:-1] if d != 1] == ([m] if m != 1 else [])


def triangular_matmul(lw: Lowering, uses: _Uses) -> bool:
    """``tril(A @ B, d)[i, j] == (A @ B)[i, j] if j - i <= d else 0`` (``triu``: if ``j - i >= d``).

    ``torch.tril``/``triu`` decompose into ``where(j - i <= d, C, 0)`` over index grids (iotas) that no kernel
    can read from memory; the matmul itself is marked instead (``attrs['tri']`` = (lower|upper, d)): its
    kernel applies the mask to each tile and skips the K loop of the tiles wholly outside the triangle
    (nearly half the FLOPs of a square product), and the ``where`` goes. Matches a 2-D matmul read only by
    that ``where``, whose condition compares exactly column index minus row index with an integer diagonal."""
    for wh in uses.live:
        if wh.kind != PW or wh.op != "where" or len(wh.args) != 3 or wh.args[2] not in (0, 0.0):
            continue
        cond, mm = wh.args[0], wh.args[1]
        if not isinstance(mm, Node) or mm.kind != MM or len(mm.shape) != 2 or "tri" in mm.attrs \
                or mm.shape != wh.shape or not uses.only_reader(mm, wh):
            continue
        kind = _triangle(cond, mm.shape)
        if kind is not None and wh.dtype == mm.dtype:
            mm.attrs["tri"] = kind
            uses.replace(wh, mm)
            return True
    return False


def _triangle(cond: Any, shape: tuple[int, ...]) -> tuple[str, int] | None:
    """("lower", d) for ``(j - i) <= d``, ("upper", d) for ``(j - i) >= d`` over an (M, N) grid of row
    index i and column index j (iotas viewed as (1, N) and (M, 1)); None for anything else."""
    if not isinstance(cond, Node) or cond.kind != PW or cond.op not in ("le", "ge") or len(cond.args) != 2:
        return None
    diff, d = cond.args
    if not isinstance(d, int) or isinstance(d, bool) or not isinstance(diff, Node) or diff.kind != PW \
            or diff.op != "sub" or len(diff.args) != 2:
        return None
    col, row = diff.args
    m, n = shape
    if not (_index_along(col, (1, n)) and _index_along(row, (m, 1))):
        return None
    return ("lower" if cond.op == "le" else "upper", d)


def _index_along(v: Any, shape: tuple[int, int]) -> bool:
    """``v`` is ``arange(k)`` (an iota from 0 in steps of 1) viewed as ``shape`` (k along one dim)."""
    if not isinstance(v, Node) or v.kind != VIEW or v.shape != shape or v.attrs.get("how") != "reshape":
        return False
    io = v.args[0]
    return io.kind == PW and io.op == "iota" and not io.args and io.shape == (max(shape),) \
        and io.attrs.get("dim") == 0


def scalar_after_matmul(lw: Lowering, uses: _Uses) -> bool:
    """``(s * A) @ B == s * (A @ B)`` and ``(A / s) @ B == (A @ B) / s`` (either operand, ``s`` a number).

    A scalar multiply or divide of a matmul operand is a separate pass over that operand (a pointwise kernel
    writing a scaled copy, or a scaled copy of the weights on every call); after the product it is one
    operation per output element in the matmul's epilogue. Matches a fp32 operand that is exactly
    ``mul(T, s)``, ``mul(s, T)`` or ``div(T, s)`` of the operand's own shape (or a transpose of one, as a
    linear layer reads its weight), read by nothing else."""
    for mm in uses.live:
        if mm.kind != MM:
            continue
        for i, op in enumerate(mm.args):
            view = op if isinstance(op, Node) and op.kind == VIEW and op.attrs.get("how") == "permute" else None
            inner = op.args[0] if view is not None else op  # a linear layer reads its weight transposed
            scaled = _scalar_of(inner)
            if scaled is None or not uses.only_reader(inner, view or mm) or (view and not uses.only_reader(view, mm)):
                continue
            t, how, s = scaled
            args = list(mm.args)
            args[i] = lw.permute(t, list(view.attrs["perm"])) if view is not None else t
            new = lw.mm(args[0], args[1])
            new.attrs.update(mm.attrs)  # a triangular mark stays: its zeros scale to zeros
            uses.replace(mm, lw.pw(how, new, s))
            return True
    return False


def _scalar_of(op: Any) -> tuple[Node, str, float | int] | None:
    """(T, "mul"/"div", s) when ``op`` is ``T * s``, ``s * T`` or ``T / s`` with a Python number ``s``."""
    if not isinstance(op, Node) or op.kind != PW or op.op not in ("mul", "div") or len(op.args) != 2 or op.attrs:
        return None
    a, b = op.args
    if op.op == "mul" and not isinstance(a, Node):
        a, b = b, a
    if not isinstance(a, Node) or isinstance(b, (Node, bool)) or not isinstance(b, (int, float)):
        return None
    if a.shape != op.shape or a.dtype != torch.float32 or op.dtype != torch.float32:
        return None
    return a, op.op, b


def sum_before_convolution(lw: Lowering, uses: _Uses) -> bool:
    """``sum_o conv(x, W)[n, co, o] == sum_{ci, k} W[co, ci, k] * sum_{i in V_k} x[n, ci, i]`` (groups = 1).

    Each output position of a convolution sums products of one weight tap k with one input element, so the
    sum over all output positions (a global average pool, ``mean(dim=[2, 3])``) is, per tap, the weight times
    the sum of the input over the positions V_k from which that tap lands inside the output: the whole input
    less a border that padding, stride and cropping leave out (for a transposed convolution, input i reaches
    output i * s - p + k * d; for a convolution, output o reads input o * s - p + k * d). That is one pass
    over ``x`` and an [N, Ci*K] x [Ci*K, Co] contraction, instead of the convolution and its output written
    and read back. A sum over some spatial dims only (a mean over depth) leaves a convolution over the others,
    of the input's tap sums as Ci*K_summed channels: a torch call with that many times fewer FLOPs.
    Multiplies and adds of numbers or per-channel tensors between the convolution and the sum commute with it
    (an added term counts once per summed output position). Matches a fp32 convolution or transposed
    convolution with groups = 1 whose output only that chain reads, ending in a sum over spatial dims (over
    some of them: a torch call's convolution only, which stays one)."""
    for r in uses.live:
        if r.kind != REDUCE or r.op != "sum" or len(r.shape) < 3 or not r.dims or r.dims[0] < 2:
            continue
        found = _linear_chain(r.args[0], r, uses)
        if found is None:
            continue
        conv, chain = found
        geo = _geometry(conv)
        x, w = conv.args[:2]
        summed = tuple(d - 2 for d in r.dims)
        if not geo or geo["groups"] != 1 or any(a.dtype != torch.float32 for a in (x, w, conv)) \
                or len(x.shape) != len(conv.shape) or (len(summed) < len(geo["kernel"]) and conv.kind != EXTERN):
            continue
        total = lw.view(_summed_convolution(lw, x, w, conv.shape, geo, summed), r.shape)
        count = math.prod(conv.shape[2 + j] for j in summed)
        for how, arg in reversed(chain):  # innermost (next to the convolution) first; an added term, count times
            added = how in ("add", "sub")
            total = lw.pw(how, total, (lw.pw("mul", arg, count) if isinstance(arg, Node) else arg * count)
                          if added else arg)
        uses.replace(r, total)
        return True
    return False


def _linear_chain(y: Node, reader: Node, uses: _Uses) -> tuple[Node, list[tuple[str, Any]]] | None:
    """(convolution, chain) when ``y`` is a convolution (a torch call or a CONV node) under multiplies / divides
    by a number or a per-channel tensor and adds / subtracts of a number or a per-channel tensor, each value read
    only by the next: the chain as (op, number or tensor) from ``y`` inward; None for anything else."""
    def convolution(n: Node) -> Node | None:
        return n if (n.kind == EXTERN and n.attrs.get("op") in ("conv", "conv_transpose")) or n.kind == CONV else None

    return _chain_to(y, reader, uses, convolution, _per_channel, ("add", "sub", "mul", "div"))


def _geometry(conv: Node) -> dict[str, Any] | None:
    """A convolution's kernel/stride/padding/dilation/output_padding per spatial dim, groups and transposed: a
    torch call's ``geometry`` attr, a CONV node's own attrs; None for anything else."""
    return conv.attrs.get("geometry") if conv.kind == EXTERN else (conv.attrs if conv.kind == CONV else None)


def _torch_convolution(lw: Lowering, x: Node, w: Node, shape: tuple[int, ...], geometry: dict[str, Any]) -> Node:
    """A torch (cuDNN) convolution call of ``x`` with ``w`` (no bias) under ``geometry`` (per spatial dim, as
    :func:`_geometry` gives it), writing ``shape``: an extern node that carries its geometry."""
    g, d = geometry, len(geometry["kernel"])
    if g["transposed"]:
        call = (f"F.conv_transpose{d}d({{0}}, {{1}}, None, stride={g['stride']}, padding={g['padding']}, "
                f"output_padding={g['output_padding']}, groups={g['groups']}, dilation={g['dilation']})")
    else:
        call = (f"F.conv{d}d({{0}}, {{1}}, None, stride={g['stride']}, padding={g['padding']}, "
                f"dilation={g['dilation']}, groups={g['groups']})")
    val = torch.empty(shape, dtype=torch.float32, device="meta")
    return lw.extern(call, (x, w), val, op="conv_transpose" if g["transposed"] else "conv", geometry=geometry)


def _per_channel(b: Node, shape: tuple[int, ...]) -> bool:
    """``b`` broadcasts against ``shape`` [N, C, *spatial] along every dim but the channels (C or 1 there)."""
    pad = (1,) * (len(shape) - len(b.shape)) + b.shape
    return len(b.shape) <= len(shape) and pad[0] == 1 and pad[1] in (1, shape[1]) and all(d == 1 for d in pad[2:]) \
        and b.dtype == torch.float32


def _summed_convolution(lw: Lowering, x: Node, w: Node, out_shape: tuple[int, ...], geo: dict[str, Any],
                        summed: tuple[int, ...]) -> Node:
    """``sum_o conv(x, w)[n, co, o]`` over the spatial dims ``summed``: per summed dim (last first), the input
    summed over the positions each tap reaches (masks from index grids); then, all dims summed, contracted with
    the weights ([N, Co]); otherwise a convolution over the other dims (:func:`_convolution_of_tap_sums`)."""
    nd = len(x.shape) - 2
    cur = x  # [N, Ci, ...] with I_j replaced by K_j for each dim j summed so far
    for j in sorted(summed, reverse=True):
        axis, k = 2 + j, geo["kernel"][j]
        shape = (*cur.shape[:axis], k, *cur.shape[axis:])
        wide = lw.expand(lw.view(cur, (*cur.shape[:axis], 1, *cur.shape[axis:])), shape)
        taps = _reached(lw, wide, _iota(lw, wide, axis), _iota(lw, wide, axis + 1), geo, j, out_shape[axis])
        cur = lw.reduce("sum", taps, (axis + 1,), False)
    if len(summed) < nd:
        return _convolution_of_tap_sums(lw, cur, w, out_shape, geo, sorted(summed))
    n, ci, kernel = x.shape[0], x.shape[1], tuple(geo["kernel"])
    if geo["transposed"]:  # w [Ci, Co, K]: contract [N, Ci, 1, K] with [1, Ci, Co, K] over Ci and K
        prod = lw.pw("mul", lw.view(cur, (n, ci, 1, *kernel)), lw.view(w, (1, *w.shape)))
        return lw.reduce("sum", prod, (1, *range(3, 3 + nd)), False)
    # w [Co, Ci, K]: contract [N, 1, Ci, K] with [1, Co, Ci, K] over Ci and K
    prod = lw.pw("mul", lw.view(cur, (n, 1, ci, *kernel)), lw.view(w, (1, *w.shape)))
    return lw.reduce("sum", prod, tuple(range(2, 3 + nd)), False)


def _convolution_of_tap_sums(lw: Lowering, sums: Node, w: Node, out_shape: tuple[int, ...], geo: dict[str, Any],
                             summed: list[int]) -> Node:
    """The convolution over the spatial dims not ``summed`` of ``sums`` [N, Ci, ...] (tap sums K_j at each
    summed dim j, input positions elsewhere) as Ci*K_summed channels, channel (ci, k_summed...) ci-major, with
    the weights rearranged to match: a torch call of ``geo``'s kind, one dimension per dim kept."""
    nd = len(geo["kernel"])
    rest = [j for j in range(nd) if j not in summed]
    n, ci = sums.shape[:2]
    chans = ci * math.prod(geo["kernel"][j] for j in summed)
    inp = lw.view(lw.permute(sums, [0, 1, *(2 + j for j in summed), *(2 + j for j in rest)]),
                  (n, chans, *(sums.shape[2 + j] for j in rest)))
    krest = tuple(geo["kernel"][j] for j in rest)
    if geo["transposed"]:  # [Ci, Co, K] -> [Ci, K_summed, Co, K_rest] -> [Ci*K_summed, Co, K_rest]
        co = w.shape[1]
        wk = lw.view(lw.permute(w, [0, *(2 + j for j in summed), 1, *(2 + j for j in rest)]), (chans, co, *krest))
    else:  # [Co, Ci, K] -> [Co, Ci, K_summed, K_rest] -> [Co, Ci*K_summed, K_rest]
        co = w.shape[0]
        wk = lw.view(lw.permute(w, [0, 1, *(2 + j for j in summed), *(2 + j for j in rest)]), (co, chans, *krest))
    sub = {key: tuple(geo[key][j] for j in rest) for key in ("stride", "padding", "dilation", "output_padding")}
    return _torch_convolution(lw, inp, wk, (n, co, *(out_shape[2 + j] for j in rest)),
                              {"kernel": krest, **sub, "groups": 1, "transposed": geo["transposed"]})


def convolution_of_pooled_weights(lw: Lowering, uses: _Uses) -> bool:
    """``avg_pool(conv(x, W), p) == conv'(x, W')``: average pooling (kernel = stride) after a convolution is
    one convolution whose taps are the pooled ones, so the full-resolution output is never written.

    Per spatial dim, with the convolution's stride s, padding P, dilation d and K taps, pooling by p:
    - convolution: ``z[q] = 1/p sum_{r<p, k} W[k] x[(q p + r) s + k d - P]``, a convolution of stride p*s,
      padding P, dilation 1 and ``s (p - 1) + d (K - 1) + 1`` taps, ``W'[t] = 1/p sum_{r s + k d = t} W[k]``
      (p*K taps where there were K, over p times fewer outputs per dim);
    - transposed convolution with p a multiple m of s: input i reaches ``y[i s + k d - P]``, so
      ``z[q] = sum_i x[i] c(q m - i)`` with ``c(e) = 1/p sum_{r<p, k: k d - P - r = e s} W[k]``: a (plain)
      convolution of stride m over the input, ``W'[t] = c(e_max - t)``, padding e_max (``e`` from
      ``ceil((1 - p - P) / s)`` to ``floor((d (K - 1) - P) / s)``), e.g. a stride-2 transposed convolution
      pooled by 2 is a stride-1 convolution with 2 taps per dim, and the 8x larger output is never made.
    Multiplies and adds of numbers or per-channel tensors between them commute with the pooling (a per-channel
    term is its own average; under a ``divisor_override`` it weighs window size / divisor). Matches a fp32 convolution (a torch call or a CONV node, any groups) whose output
    only that chain reads, pooled with kernel = stride, no padding, no dilation and no partial window; the new
    weights are computed from ``W`` on every call (masks from index grids, one small kernel)."""
    for wn in uses.live:
        if wn.kind != WINDOW or wn.op != "avg" or len(wn.shape) < 3:
            continue
        src, keep = _unit_view_dims(wn, uses)
        found = _linear_chain(src, wn if src is wn.args[0] else wn.args[0], uses)
        if found is None:
            continue
        conv, chain = found
        window: dict[str, Any] = {key: tuple(wn.attrs[key][i] for i in keep)
                                  for key in ("kernel", "stride", "padding", "dilation")}
        window["divisor_override"] = wn.attrs.get("divisor_override")
        pooled = tuple(wn.shape[i] for i in keep)
        plan = _pooled_geometry(conv, window, pooled)
        if plan is None:
            continue
        weights = _pooled_taps(lw, _as_plain_weights(lw, conv.args[1], plan), plan)
        total = _leading_all(lw, _convolution_like(lw, conv, conv.args[0], weights, plan), pooled)
        share = math.prod(plan["pool"]) / plan["divisor"]  # 1 unless a divisor_override: an added term's weight
        for how, arg in reversed(chain):  # innermost first; a per-channel term is its own average
            if how in ("add", "sub") and share != 1:
                arg = lw.pw("mul", arg, share) if isinstance(arg, Node) else arg * share
            total = lw.pw(how, total, arg)
        uses.replace(wn, lw.view(total, wn.shape))
        return True
    return False


def _unit_view_dims(wn: Node, uses: _Uses) -> tuple[Node, list[int]]:
    """(the value pooled, the window's dims that are its dims): through a reshape that only inserts size-1 dims
    (``avg_pool1d`` is ``avg_pool2d`` of ``x.unsqueeze(-2)``), the window's other dims being size-1 copies."""
    v = wn.args[0]
    every = list(range(len(wn.shape)))
    if v.kind != VIEW or v.attrs.get("how") != "reshape" or not uses.only_reader(v, wn):
        return v, every
    inner, outer, keep, i = v.args[0].shape, v.shape, [], 0
    for j, size in enumerate(outer):
        if i < len(inner) and inner[i] == size:
            keep.append(j)
            i += 1
        elif size != 1:
            return v, every
    if i != len(inner) or any(wn.attrs["kernel"][j] != 1 or wn.attrs["padding"][j] for j in every if j not in keep):
        return v, every
    return v.args[0], keep


def _pooled_geometry(conv: Node, window: dict[str, tuple[int, ...]], pooled: tuple[int, ...]) -> dict[str, Any] | None:
    """The pooled convolution's geometry where :func:`convolution_of_pooled_weights` applies (``window``: the
    pooling's kernel/stride/padding/dilation per dim of the convolution's output, ``pooled`` its output shape):
    per spatial dim ``taps`` (new K), ``stride``, ``padding``, ``pool``, and ``shift`` (transposed: e_max), plus
    ``divisor``, ``groups``, ``transposed`` and the original's per-dim tuples under ``orig``; else None."""
    geo = _geometry(conv)
    x, w = conv.args[:2]
    nd = len(conv.shape) - 2
    if not geo or len(geo["kernel"]) != nd or any(a.dtype != torch.float32 for a in (x, w, conv)) \
            or len(pooled) != nd + 2:
        return None
    k, s, pad = window["kernel"], window["stride"], window["padding"]
    if any((k[i], s[i], pad[i]) != (1, 1, 0) for i in range(2)) or any(d != 1 for d in window["dilation"]):
        return None
    pools = tuple(k[2:])
    if any(s[2 + j] != pools[j] or pad[2 + j] or pooled[2 + j] != conv.shape[2 + j] // pools[j]
           for j in range(nd)) or math.prod(pools) < 2 or pooled[:2] != conv.shape[:2]:
        return None
    taps, strides, pads, shifts = [], [], [], []
    for j in range(nd):
        p, st, pd, d, kk = pools[j], geo["stride"][j], geo["padding"][j], geo["dilation"][j], geo["kernel"][j]
        if not geo["transposed"]:
            taps.append(st * (p - 1) + d * (kk - 1) + 1)
            strides.append(p * st)
            pads.append(pd)
            shifts.append(0)
            continue
        if p % st:
            return None
        e_min, e_max = -((pd + p - 1) // st), (d * (kk - 1) - pd) // st
        if e_max < 0:
            return None
        taps.append(e_max - e_min + 1)
        strides.append(p // st)
        pads.append(e_max)
        shifts.append(e_max)
    if any((x.shape[2 + j] + 2 * pads[j] - taps[j]) // strides[j] + 1 < pooled[2 + j] for j in range(nd)):
        return None  # too few outputs (a transposed convolution's cropping past its input): left alone
    divisor = window.get("divisor_override") or math.prod(pools)
    return {"taps": tuple(taps), "stride": tuple(strides), "padding": tuple(pads), "shift": tuple(shifts),
            "pool": pools, "divisor": divisor, "groups": geo["groups"], "transposed": geo["transposed"],
            "orig": geo}


def _as_plain_weights(lw: Lowering, w: Node, plan: dict[str, Any]) -> Node:
    """``w`` in a plain convolution's layout [Co, Ci/g, K...]: a transposed one's [Ci, Co/g, K...] regrouped."""
    if not plan["transposed"]:
        return w
    g, ci, cog, kernel = plan["groups"], w.shape[0], w.shape[1], w.shape[2:]
    nd = len(kernel)
    grouped = lw.view(w, (g, ci // g, cog, *kernel))
    return lw.view(lw.permute(grouped, [0, 2, 1, *range(3, 3 + nd)]), (g * cog, ci // g, *kernel))


def _pooled_taps(lw: Lowering, w: Node, plan: dict[str, Any]) -> Node:
    """The pooled convolution's weights [Co, Ci/g, taps...] from ``w`` [Co, Ci/g, K...] (plain layout): new tap
    t gathers, per spatial dim, the old taps k that land on it, over 1 / divisor. One row kernel: ``w`` broadcast
    to [Co, Ci/g, taps..., K...], masked by index grids (nothing stored), summed over the K dims."""
    geo, nd = plan["orig"], len(plan["taps"])
    co, cig, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    wide = lw.expand(lw.view(w, (co, cig, *(1,) * nd, *kernel)), (co, cig, *plan["taps"], *kernel))
    cur = wide
    for j in range(nd):
        t, k = _iota(lw, wide, 2 + j), _iota(lw, wide, 2 + nd + j)
        s, p, pd, d = geo["stride"][j], plan["pool"][j], geo["padding"][j], geo["dilation"][j]
        if geo["transposed"]:  # r = k d - P - s (e_max - t) in [0, p)
            off = _shift(lw, lw.pw("add", _times(lw, k, d), _times(lw, t, s)), -pd - s * plan["shift"][j])
            lim, step = p, 1
        else:  # t - k d = r s with r in [0, p)
            off, lim, step = lw.pw("sub", t, _times(lw, k, d)), s * p, s
        cur = lw.pw("where", lw.pw("ge", off, 0, dtype=torch.bool), cur, 0.0)
        cur = lw.pw("where", lw.pw("lt", off, lim, dtype=torch.bool), cur, 0.0)
        if step > 1:
            cur = lw.pw("where", lw.pw("eq", lw.pw("fmod", off, step), 0, dtype=torch.bool), cur, 0.0)
    summed = lw.reduce("sum", cur, tuple(range(2 + nd, 2 + 2 * nd)), False)
    return lw.pw("div", summed, float(plan["divisor"]))


def _convolution_like(lw: Lowering, conv: Node, x: Node, w: Node, plan: dict[str, Any]) -> Node:
    """A plain convolution of ``x`` with ``w`` (``plan``'s stride and padding, dilation 1), of ``conv``'s kind:
    a torch call where ``conv`` was one, else a CONV node (the Triton implicit-GEMM family)."""
    nd, groups = len(plan["taps"]), plan["groups"]
    out = [(x.shape[2 + j] + 2 * plan["padding"][j] - plan["taps"][j]) // plan["stride"][j] + 1 for j in range(nd)]
    shape = (x.shape[0], w.shape[0], *out)
    geometry = {"kernel": plan["taps"], "stride": plan["stride"], "padding": plan["padding"],
                "dilation": (1,) * nd, "output_padding": (0,) * nd, "groups": groups, "transposed": False}
    if conv.kind == CONV:
        return lw.g.add(Node(CONV, shape, torch.float32, args=(x, w), op="conv", attrs=geometry))
    return _torch_convolution(lw, x, w, shape, geometry)


def _leading_all(lw: Lowering, v: Node, shape: tuple[int, ...]) -> Node:
    """``v`` cut to ``shape`` (the first entries of each dim where it is longer)."""
    for dim, n in enumerate(shape):
        v = _leading(lw, v, dim, n)
    return v


def scan_of_padded_input(lw: Lowering, uses: _Uses) -> bool:
    """``cat([c]*k, cumsum(v), d) == cumsum(cat([c]*k, v), d)`` with c the scan's identity (0 for a sum, 1 for a
    product): k leading identities stay identities under the scan, and every later prefix is v's, shifted.

    An exclusive cumulative sum (``cat(zeros, cumsum(x[:-1]))``) then reads the shifted input inside the scan
    kernel (the concatenation joins it as prologue) instead of writing the scan and copying it into the
    concatenation: one pass over memory instead of two. Matches a two-source ``cat`` along the scan's dim of a
    fill of the identity and a sum or product scan that nothing else reads."""
    for cat in uses.live:
        if cat.kind != PW or cat.op != "cat" or len(cat.args) != 2:
            continue
        fill, sc = cat.args
        d = cat.attrs["dim"]
        if not (isinstance(fill, Node) and is_fill(fill) and isinstance(sc, Node) and sc.kind == SCAN
                and tuple(sc.dims) == (d,) and sc.dtype == cat.dtype == fill.dtype and uses.only_reader(sc, cat)):
            continue
        if fill.attrs["value"] != {"sum": 0, "prod": 1}.get(sc.op, None):
            continue
        padded = lw.g.add(Node(PW, cat.shape, cat.dtype, args=(fill, sc.args[0]), op="cat", attrs={"dim": d}))
        uses.replace(cat, lw.g.add(Node(SCAN, cat.shape, cat.dtype, args=(padded,), op=sc.op, dims=(d,))))
        return True
    return False


def pool_of_pool(lw: Lowering, uses: _Uses) -> bool:
    """``pool(pool(x, k1), k2) == pool(x, k1 * k2)`` per dimension, for two max (or two average) poolings whose
    kernel is their stride, without padding, dilation, ceil_mode or divisor_override: the second window covers
    k2 consecutive first outputs, each k1 consecutive inputs, so k1 * k2 consecutive inputs; an average of equal
    averages is the average; and floor(floor(n / k1) / k2) == floor(n / (k1 k2)), so the shapes agree.

    The first pooling's output (1/k1 of the input per dimension) is then never written and read back, and the
    pooled chain before it still joins the one window kernel as its prologue."""
    for w2 in uses.live:
        w1 = w2.args[0] if w2.kind == WINDOW and w2.op in ("max", "avg") else None
        if not (isinstance(w1, Node) and w1.kind == WINDOW and w1.op == w2.op and uses.only_reader(w1, w2)
                and _tiling(w1) and _tiling(w2)):
            continue
        x = w1.args[0]
        kernel = tuple(a * b for a, b in zip(w1.attrs["kernel"], w2.attrs["kernel"], strict=True))
        if tuple(n // k for n, k in zip(x.shape, kernel, strict=True)) != tuple(w2.shape):
            continue
        attrs = {**w1.attrs, "kernel": kernel, "stride": kernel}
        uses.replace(w2, lw.g.add(Node(WINDOW, tuple(w2.shape), w2.dtype, args=(x,), op=w2.op, attrs=attrs)))
        return True
    return False


def recompute_for_window(lw: Lowering, uses: _Uses) -> bool:
    """``pool(f(x, s(x)))`` where ``f`` is elementwise and ``s`` reduces (a GroupNorm's or a softmax's statistics):
    the pooling gets its own copy of ``f``'s chain, computed per tap from ``x`` and the (small) statistics, while
    the reductions keep the original chain. ``f(x, s) == f(x, s)``: nothing changes but where the value lives.

    Without it the row kernel computing the statistics also applies ``f`` and stores the full-size result for
    the pooling to read back; with it the row kernel stores only the statistics, and the copy becomes the
    window kernel's prologue (``_partition``: nodes marked ``per_tap`` form a pointwise group of their own).
    Matches a max or average pooling whose input only it reads, computed by a chain that reads a computed value
    smaller than itself (a statistic: what puts the chain into the row kernel), where the chain's values read
    outside it lead only to smaller values (the reductions)."""
    for w in uses.live:
        x = w.args[0] if w.kind == WINDOW and w.op in ("max", "avg") else None
        if not (isinstance(x, Node) and x.kind == PW and not x.attrs.get("per_tap") and uses.only_reader(x, w)):
            continue
        cone = _elementwise_cone(x)
        inside = {n.id for n in cone} | {w.id}
        shared = [n for n in cone if any(u.id not in inside for u in uses.users.get(n.id, []))]
        reads_statistic = any(a.id not in inside and a.numel < x.numel and _computed(a) for n in cone
                              for a in n.node_args())
        if not reads_statistic or any(n.id in uses.outputs or not all(_feeds_reductions(u, uses, x.numel)
                                                             for u in uses.users[n.id] if u.id not in inside)
                             for n in shared):
            continue
        copies: dict[int, Node] = {}
        for n in sorted(cone, key=lambda c: c.id):
            args = tuple(copies.get(a.id, a) if isinstance(a, Node) else a for a in n.args)
            copies[n.id] = lw.g.add(Node(n.kind, n.shape, n.dtype, args=args, op=n.op, dims=n.dims,
                                         attrs={**n.attrs, "per_tap": True}, name=n.name))
        w.args = (copies[x.id], *w.args[1:])
        return True
    return False


def _computed(a: Node) -> bool:
    """``a`` is computed in the graph: not an input, a parameter (a bias viewed per channel) or a constant."""
    while a.kind == VIEW:
        a = a.args[0]
    return a.kind not in (INPUT, PARAM) and not is_fill(a)


def _feeds_reductions(u: Node, uses: _Uses, size: int) -> bool:
    """``u`` is smaller than ``size`` (a reduction, a statistic), or an elementwise op or reshape of that size
    whose every reader is such (a variance's ``(x - mean)**2``), and never a model output."""
    if u.numel < size:
        return True
    return is_elementwise(u) and u.id not in uses.outputs and all(_feeds_reductions(r, uses, size)
                                                            for r in uses.users.get(u.id, []))


def _elementwise_cone(x: Node) -> list[Node]:
    """``x`` and the elementwise ops and reshapes of its size it is computed from (stopping at anything else)."""
    cone: dict[int, Node] = {}
    stack = [x]
    while stack:
        n = stack.pop()
        if n.id in cone:
            continue
        cone[n.id] = n
        for a in n.node_args():
            if is_elementwise(a) and a.numel == x.numel and not is_fill(a):
                stack.append(a)
    return list(cone.values())


def _tiling(w: Node) -> bool:
    """A pooling whose windows tile its input: kernel = stride, no padding, dilation 1, floor mode, the plain
    average's divisor."""
    a = w.attrs
    return (tuple(a["kernel"]) == tuple(a["stride"]) and not any(a["padding"]) and all(d == 1 for d in a["dilation"])
            and not a.get("ceil_mode") and not a.get("divisor_override"))


def _times(lw: Lowering, v: Node, c: int) -> Node:
    return v if c == 1 else lw.pw("mul", v, c)


def _shift(lw: Lowering, v: Node, c: int) -> Node:
    return v if c == 0 else lw.pw("add", v, c)


def _iota(lw: Lowering, like: Node, dim: int) -> Node:
    """The index along ``dim`` over ``like``'s shape (int64), computed where ``like`` is read: the masks built
    from it join the kernel that sums ``like`` instead of being stored (``like`` is an argument for placement
    only, as ``gather``'s index grid is)."""
    return lw.pw("iota", like, dtype=torch.int64, dim=dim)


def _reached(lw: Lowering, v: Node, tap: Node, pos: Node, geo: dict[str, Any], j: int, out: int) -> Node:
    """``v`` where input position ``pos`` meets tap ``tap`` inside the output along spatial dim ``j`` (size
    ``out``), else 0. Transposed: output ``pos * s - p + tap * d`` in [0, out). Otherwise the output ``o``
    with ``o * s - p + tap * d == pos``: ``t = pos + p - tap * d`` a multiple of s in [0, out * s)."""
    s, p, d = geo["stride"][j], geo["padding"][j], geo["dilation"][j]
    if geo["transposed"]:
        t, bound = _shift(lw, lw.pw("add", _times(lw, pos, s), _times(lw, tap, d)), -p), out
    else:
        t, bound = lw.pw("sub", _shift(lw, pos, p), _times(lw, tap, d)), out * s
    inside = lw.pw("where", lw.pw("ge", t, 0, dtype=torch.bool), v, 0.0)
    inside = lw.pw("where", lw.pw("lt", t, bound, dtype=torch.bool), inside, 0.0)
    if not geo["transposed"] and s > 1:
        inside = lw.pw("where", lw.pw("eq", lw.pw("fmod", t, s), 0, dtype=torch.bool), inside, 0.0)
    return inside


Rewrite = Callable[[Lowering, _Uses], bool]
REWRITES: tuple[tuple[str, Rewrite], ...] = (
    ("gemv-of-reduced-weights", gemv_of_reduced_weights),
    ("linear-of-pooled-weights", linear_of_pooled_weights),
    ("triangular-matmul", triangular_matmul),
    ("scalar-after-matmul", scalar_after_matmul),
    ("sum-before-convolution", sum_before_convolution),
    ("convolution-of-pooled-weights", convolution_of_pooled_weights),
    ("scan-of-padded-input", scan_of_padded_input),
    ("pool-of-pool", pool_of_pool),
    ("recompute-for-window", recompute_for_window),
)

