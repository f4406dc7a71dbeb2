"""Row kernels: reductions and normalizations over one set of rows (a fusion group).

A program owns BLOCK_K rows (kept elements ``k``) and walks BLOCK_R-wide tiles of their reduced
elements ``r``. Values are tiles: "full" ones [BLOCK_K, BLOCK_R] (one per element) and "kept" ones
[BLOCK_K, 1] (one per row, results of reductions). Three shapes of kernel:

- one pass: the whole row fits one tile and is loaded once;
- multi-pass: one loop over the row per level of dependent reductions, then a loop writing the
  full-size outputs. Two dependent reductions with a single-read form share one loop (a "pair"):
  ``sum(x)`` and the centred ``sum((x - sum(x)/R)^2)`` (Welford: per-lane count, mean and M2, merged
  with Chan's formula) and ``max(x)`` with ``sum(exp(x - max(x)))`` (online softmax: per-lane running
  max and rescaled sum). Softmax, log-softmax, layer/group norm and variance then read their input
  twice (statistics, then the write) instead of three times;
- split: few long rows (LayerNorm over (C, H, W), BatchNorm statistics per channel) leave most SMs
  idle with one program per row, so each row is cut into SPLIT chunks of CHUNK elements and the grid
  is (row blocks, SPLIT). A stats kernel per level writes each chunk's partials (sum, max, min, or a
  pair's statistics) to an fp32 workspace [slots, K, SPLIT]; later kernels combine them (every program
  of a row reads the row's SPLIT partials: a few KB from L2) and an apply kernel writes the full
  outputs over the same (rows x chunks) grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonsmith.agents.builtin._exprs import Digits
from tritonsmith.agents.builtin._ir import (PW, REDUCE, SMS, Lead, Node, NotGeneric, contiguous_strides, is_fill,
                                           numel)
from tritonsmith.agents.builtin._kernelbase import (IDX64_AT, KernelSource, KernelWriter, next_pow2, row_digits,
                                                   row_index_lines)
from tritonsmith.agents.builtin._partition import FULL, KEPT, Group, Plan, layout, resolve_base

__all__ = ["Pair", "find_pairs", "row_kernel", "split_plan"]

TARGET_PROGRAMS = 8 * SMS  # a split row kernel aims at this many programs (several waves per SM)
SPLIT_MIN_R = 1 << 15  # rows shorter than this are never split unless the configuration forces it
_IDENTITY = {"sum": "0.0", "max": "-float('inf')", "min": "float('inf')"}
_REDUCE_FN = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}


@dataclass(frozen=True)
class Pair:
    """Two dependent reductions computed from one read of ``first.args[0]`` (x).

    ``welford``: first = sum(x), second = sum((x - first / R) ** 2);
    ``online``: first = max(x), second = sum(exp(x - first)).
    """

    kind: str
    first: Node
    second: Node


def _inner(g: Group, a: Any, kind: str, op: str) -> bool:
    return isinstance(a, Node) and g.has(a) and a.kind == kind and a.op == op


def _welford(g: Group, r2: Node, r: int) -> Pair | None:
    sq = r2.args[0]
    if not _inner(g, sq, PW, "mul") or sq.args[0] is not sq.args[1] or g.rank[sq.id] != FULL:
        return None
    d = sq.args[0]
    if not _inner(g, d, PW, "sub") or not _inner(g, d.args[1], PW, "div"):
        return None
    x, mean = d.args
    r1, n = mean.args
    if _inner(g, r1, REDUCE, "sum") and r1.args[0] is x and r1.dims == r2.dims and isinstance(n, float) \
            and n == float(r) and x.dtype.is_floating_point:
        return Pair("welford", r1, r2)
    return None


def _online(g: Group, r2: Node) -> Pair | None:
    e = r2.args[0]
    if not _inner(g, e, PW, "exp") or not _inner(g, e.args[0], PW, "sub"):
        return None
    x, r1 = e.args[0].args
    if _inner(g, r1, REDUCE, "max") and r1.args[0] is x and r1.dims == r2.dims and x.dtype.is_floating_point:
        return Pair("online", r1, r2)
    return None


def find_pairs(g: Group) -> dict[int, Pair]:
    """The group's pairs, keyed by the id of both members (each reduction is in at most one pair)."""
    assert g.domain is not None
    out: dict[int, Pair] = {}
    for n in g.nodes:
        if n.kind == REDUCE and n.op == "sum" and n.dtype.is_floating_point and n.id not in out:
            pair = _welford(g, n, g.domain.r) or _online(g, n)
            if pair is not None and pair.first.id not in out:
                out[pair.first.id] = out[pair.second.id] = pair
    return out


def levels(g: Group, pairs: dict[int, Pair]) -> dict[int, int]:
    """Reduction depth of each node: 0 before any reduction, L after the L-th dependent one; the
    second member of a pair shares its first member's level (both come from one loop)."""
    lv: dict[int, int] = {}
    for n in g.nodes:
        base = max((lv[a.id] for a in n.node_args() if g.has(a)), default=0)
        pair = pairs.get(n.id)
        if n.kind == REDUCE:
            lv[n.id] = lv[pair.first.id] if pair is not None and pair.second is n else base + 1
        else:
            lv[n.id] = base
    return lv


def splittable(g: Group) -> bool:
    """Partials of float sum/max/min combine exactly enough in fp32; integer and arg reductions do not split."""
    return all(n.op in _IDENTITY and n.dtype.is_floating_point for n in g.nodes if n.kind == REDUCE)


def split_plan(g: Group, cfg: dict[str, Any]) -> tuple[int, int]:
    """(SPLIT, CHUNK): how many chunks each row is cut into (1: not split) and their length.

    ``cfg["split"]``: None or absent = decide from sizes (split when the row blocks alone would give
    fewer than ``target_programs`` / 2 programs (default TARGET_PROGRAMS) and rows have at least
    ``split_min_r`` elements (default SPLIT_MIN_R), into about target / row-blocks chunks); 0 or 1 =
    never; N > 1 = about N chunks whatever the sizes.
    """
    dom = g.domain
    assert dom is not None
    block_r = min(int(cfg.get("BLOCK_R", 1024)), next_pow2(dom.r))
    rows = -(-dom.k // int(cfg.get("BLOCK_K", 1)))
    forced = cfg.get("split")
    if not splittable(g) or (forced is not None and int(forced) <= 1):
        return 1, dom.r
    if forced is None:
        target = int(cfg.get("target_programs", TARGET_PROGRAMS))
        if rows * 2 >= target or dom.r < int(cfg.get("split_min_r", SPLIT_MIN_R)):
            return 1, dom.r
        want = -(-target // rows)
    else:
        want = int(forced)
    chunk = -(-(-(-dom.r // want)) // block_r) * block_r
    split = -(-dom.r // chunk)
    return (split, chunk) if split > 1 else (1, dom.r)


def _needed_full(g: Group, targets: list[Node]) -> list[Node]:
    """Full-rank nodes the targets depend on (kept values are already known), in order."""
    need: set[int] = set()
    stack = list(targets)
    while stack:
        n = stack.pop()
        for a in n.node_args():
            if g.has(a) and g.rank[a.id] == FULL and a.id not in need:
                need.add(a.id)
                stack.append(a)
        if g.rank.get(n.id) == FULL:
            need.add(n.id)
    return [n for n in g.nodes if n.id in need and n.kind != REDUCE]


def _accumulate(n: Node, x: str, lines: list[str], init: list[str]) -> None:
    a = f"acc{n.id}"
    if n.op in ("argmax", "argmin"):
        cmp, ident = (">", "-float('inf')") if n.op == "argmax" else ("<", "float('inf')")
        init += [f"{a}_v = tl.full([BLOCK_K, BLOCK_R], {ident}, tl.float32)",
                 f"{a}_i = tl.zeros([BLOCK_K, BLOCK_R], tl.int32)"]
        lines += [f"{a}_x = tl.where(mask, {x}, {ident})",
                  f"{a}_u = {a}_x {cmp} {a}_v  # strict: the first index wins ties",
                  f"{a}_i = tl.where({a}_u, r, {a}_i)",
                  f"{a}_v = tl.where({a}_u, {a}_x, {a}_v)"]
        return
    is_int = not n.dtype.is_floating_point
    acc_t = "tl.int32" if is_int else "tl.float32"
    ident = "0" if is_int else _IDENTITY[n.op]
    init.append(f"{a} = tl.full([BLOCK_K, BLOCK_R], {ident}, {acc_t})")
    xm = f"tl.where(mask, {x}, {ident})" + (".to(tl.int32)" if is_int else "")
    combine = {"sum": f"{a} + {xm}", "max": f"tl.maximum({a}, {xm})", "min": f"tl.minimum({a}, {xm})"}[n.op]
    lines.append(f"{a} = {combine}")


def _finish(n: Node) -> list[str]:
    a = f"acc{n.id}"
    if n.op in ("argmax", "argmin"):
        red = "tl.max" if n.op == "argmax" else "tl.min"
        return [f"{a}_m = {red}({a}_v, axis=1)[:, None]",
                f"v{n.id} = tl.min(tl.where({a}_v == {a}_m, {a}_i, 2147483647), axis=1)[:, None]"]
    return [f"v{n.id} = {_REDUCE_FN[n.op]}({a}, axis=1)[:, None]  # {n.op} over the row"]


def _accumulate_pair(p: Pair, x: str, lines: list[str], init: list[str]) -> None:
    a = f"acc{p.first.id}"
    if p.kind == "welford":
        init += [f"{a}_n = tl.zeros([BLOCK_K, BLOCK_R], tl.float32)",
                 f"{a}_m = tl.zeros([BLOCK_K, BLOCK_R], tl.float32)",
                 f"{a}_q = tl.zeros([BLOCK_K, BLOCK_R], tl.float32)"]
        lines += [f"{a}_n += tl.where(mask, 1.0, 0.0)  # Welford per lane: count, mean, M2",
                  f"{a}_d = tl.where(mask, {x} - {a}_m, 0.0)",
                  # a lane is masked from some iteration on (r only grows), so each active lane has seen
                  # r0 // BLOCK_R + 1 elements: one reciprocal per iteration instead of a division per element
                  f"{a}_m += {a}_d * (1.0 / (r0 // BLOCK_R + 1))",
                  f"{a}_q += {a}_d * tl.where(mask, {x} - {a}_m, 0.0)"]
        return
    init += [f"{a}_m = tl.full([BLOCK_K, BLOCK_R], -float('inf'), tl.float32)",
             f"{a}_s = tl.zeros([BLOCK_K, BLOCK_R], tl.float32)"]
    lines += [f"{a}_x = tl.where(mask, {x}, -float('inf'))  # online softmax per lane: running max, sum",
              f"{a}_t = tl.maximum({a}_m, {a}_x)",
              f"{a}_z = tl.where({a}_t == -float('inf'), 0.0, {a}_t)",
              f"{a}_s = {a}_s * tl.exp({a}_m - {a}_z) + tl.exp({a}_x - {a}_z)",
              f"{a}_m = {a}_t"]


def _finish_pair(p: Pair) -> list[str]:
    a, v1, v2 = f"acc{p.first.id}", f"v{p.first.id}", f"v{p.second.id}"
    if p.kind == "welford":
        return [f"{v1} = tl.sum({a}_m * {a}_n, axis=1)[:, None]  # sum over the row",
                f"{a}_c = {v1} / tl.maximum(tl.sum({a}_n, axis=1)[:, None], 1.0)",
                f"{a}_e = {a}_m - {a}_c",
                f"{v2} = tl.sum({a}_q + {a}_n * {a}_e * {a}_e, axis=1)[:, None]  # Chan: sum of (x - mean)^2"]
    return [f"{v1} = tl.max({a}_m, axis=1)[:, None]  # max over the row",
            f"{a}_z = tl.where({v1} == -float('inf'), 0.0, {v1})",
            f"{v2} = tl.sum({a}_s * tl.exp({a}_m - {a}_z), axis=1)[:, None]  # sum of exp(x - max)"]


class _RowWriter:
    """Per-group state shared by the kernels of one row group."""

    def __init__(self, plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> None:
        assert g.domain is not None
        self.g, self.dom, self.name = g, g.domain, name
        self.w = KernelWriter(plan, g, name)
        self.w.check_size(self.dom.numel)
        self.pairs = find_pairs(g) if cfg.get("fuse_stats", True) else {}
        self.lv = levels(g, self.pairs)
        self.full_outs = [o for o in g.outputs if g.rank[o.id] == FULL]
        self.kept_outs = [o for o in g.outputs if g.rank[o.id] == KEPT]
        self.kept_done: set[int] = set()
        self.kept_cache: dict[Any, str] = {}
        # shape-generic: the rows' count, or (a reduction over the batch) their length, follows the leading size
        lead = self.w.lead is not None
        self.axis = _lead_axis(plan, g) if lead else 0
        self.long_rows = lead and self.axis in self.dom.dims
        self.rows = self.w.size(self.dom.k, lead and not self.long_rows)
        self.length = self.w.size(self.dom.r, self.long_rows)
        self.w.digits = _digits(plan, g, self.w.lead is None) if self.axis == 0 else None

    def reset(self) -> None:
        """A new kernel: kept values must be computed again."""
        self.kept_done, self.kept_cache = set(), {}

    def level_list(self) -> list[tuple[int, list[Node]]]:
        reds = [n for n in self.g.nodes if n.kind == REDUCE]
        return [(lvl, [n for n in reds if self.lv[n.id] == lvl]) for lvl in sorted({self.lv[n.id] for n in reds})]

    def emit_kept(self, level: int, out: list[str]) -> None:
        for n in self.g.nodes:
            if self.g.rank[n.id] == KEPT and n.kind != REDUCE and self.lv[n.id] <= level \
                    and n.id not in self.kept_done:
                self.kept_done.add(n.id)
                self.w.pointwise_line(n, out, self.kept_cache)

    def walk(self, reds: list[Node], stores: list[Node], start: str, span: str) -> list[str]:
        """One loop over ``[start, start + span)`` of the rows: accumulate ``reds`` (a pair from one
        read of its input) and store the full-rank ``stores``."""
        g, w = self.g, self.w
        firsts = [r for r in reds if r.id not in self.pairs or self.pairs[r.id].first is r]
        targets = [r.args[0] for r in firsts if g.rank.get(r.args[0].id) == FULL] + stores
        cache: dict[Any, str] = {}
        inner = [f"r = {start}r0 + tl.arange(0, BLOCK_R)[None, :]", f"mask = kmask & (r < {self.length})",
                 "lin = kbase + RPART"]
        for n in _needed_full(g, targets):
            w.pointwise_line(n, inner, cache)
        init: list[str] = []
        fin: list[str] = []
        for r in firsts:
            x = w.value(r.args[0], r.args[0].shape, FULL, inner, cache, True)
            pair = self.pairs.get(r.id)
            if pair is None:
                _accumulate(r, x, inner, init)
                fin += _finish(r)
            else:
                _accumulate_pair(pair, x, inner, init)
                fin += _finish_pair(pair)
        inner += [w.store(o, FULL) for o in stores]
        return init + [f"for r0 in range(0, {span}, BLOCK_R):"] + [f"    {line}" for line in inner] + fin

    def stride_text(self, stride: int) -> str:
        """A row-major stride of the domain as kernel text: where the leading size is a later dimension
        (split-K's partial products ``[S, lead, N]``), the strides of the dimensions before it hold it."""
        if not self.axis or stride < numel(self.dom.shape[self.axis:]):
            return str(stride)
        return f"({self.w.size(stride)})"

    def kernel_text(self, kname: str, body: list[str], constexprs: list[str], extra: tuple[str, ...],
                    title: str, values: tuple[str, ...] = ()) -> str:
        idx_lines, rpart = row_index_lines(self.g, self.w.idx64, self.rows, self.stride_text)
        body = idx_lines + [line.replace("RPART", rpart) for line in body]
        return "\n".join([f"@triton.jit\ndef {kname}({self.w.signature(constexprs, extra, values)}):",
                          self.w.docstring(title)] + [f"    {line}" for line in body]) + "\n"


def _digits(plan: Plan, g: Group, top_fixed: bool) -> Digits | None:
    """``lin``'s digits for the kernel writer (``row_digits``); None where an offset could pass 32 bits (``k`` is
    64-bit there but ``r`` is not)."""
    dom = g.domain
    assert dom is not None
    bases = [resolve_base(a, plan.owner) for n in g.nodes for a in n.node_args() if not g.has(a)]
    sizes = [dom.numel] + [b.numel for b in bases if not is_fill(b)]
    return None if max(sizes) >= IDX64_AT else row_digits(dom, top_fixed)


def _lead_axis(plan: Plan, g: Group) -> int:
    """The domain's dimension that follows the leading size (0 but for split-K's sum over its chunks, where
    it is M in ``[S, M, N]``, or InstanceNorm's ``[1, N * C, ...]`` view). Then every dimension before it is
    reduced (``_shapes``), and each full-rank value read must be a contiguous tensor of the domain's shape
    (its offset is the row-major index), so that only the reduced strides hold the leading size, or be read
    by an elementwise op before such a view (``_before_view``)."""
    lead, dom = plan.lead, g.domain
    assert lead is not None and dom is not None
    src = next((n.args[0] for n in g.nodes if n.kind == REDUCE and lead.batched(n.args[0])), None)
    axis = lead.dim(src) if src is not None else 0
    if not axis:
        return 0
    for n in g.nodes:
        for a in n.node_args():
            if g.has(a) or not (n.kind == REDUCE or g.rank.get(n.id) == FULL):
                continue
            _, strides, off = layout(a, plan.owner)
            if _before_view(n, a, lead, dom.shape, (tuple(strides), off)):
                continue
            if tuple(a.shape) != tuple(dom.shape) or (tuple(strides), off) != (contiguous_strides(a.shape), 0):
                raise NotGeneric(f"{g.nodes[0].op or g.kind} reads {list(a.shape)} over rows whose dimension {axis} "
                                 "follows the leading size: only a contiguous tensor of the rows' shape is indexed")
    return axis


def _before_view(n: Node, a: Node, lead: Lead, dom_shape: tuple[int, ...], a_layout: tuple[tuple[int, ...], int]) -> bool:
    """Whether elementwise ``n`` reads ``a`` in its own shape, where the leading size is still the first
    dimension (InstanceNorm's ``x + bias`` before the ``[1, N * C, ...]`` view): the group walks ``n``'s
    elements in the same row-major order as the domain's, so ``a``'s offset is ``lin`` decoded by ``n``'s inner
    sizes, which the leading size is not among (the first dimension is never taken modulo). A batched ``a``
    must be contiguous, so that no stride holds the leading size either."""
    if n.kind != PW or tuple(n.shape) == tuple(dom_shape) or (lead.batched(n) and lead.dim(n)):
        return False
    if not lead.batched(a):
        return True
    return lead.dim_in(a, len(n.shape)) == 0 and a_layout == (contiguous_strides(a.shape), 0)


def row_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    rw = _RowWriter(plan, g, name, cfg)
    dom = rw.dom
    split, chunk = split_plan(g, cfg)
    if split > 1:
        return _split_kernels(rw, cfg, split, chunk)
    block_k = int(cfg.get("BLOCK_K", 1))
    block_r_full = next_pow2(dom.r)
    # rows as long as the batch: no tile holds every length, so the rows are walked in loops
    one_pass = bool(cfg.get("one_pass", block_r_full * block_k <= 8192)) and not rw.long_rows
    block_r = block_r_full if one_pass else min(int(cfg.get("BLOCK_R", 1024)), block_r_full)
    body: list[str] = []
    rw.emit_kept(0, body)
    if one_pass:
        _one_pass_body(rw, body)
    else:
        for level, reds in rw.level_list():
            body += rw.walk(reds, [], "", rw.length)
            rw.emit_kept(level, body)
        if rw.full_outs:
            body += rw.walk([], rw.full_outs, "", rw.length)
    body += [rw.w.store(o, KEPT) for o in rw.kept_outs]
    mode = "one pass: the row is one tile" if one_pass else \
        f"multi-pass: one loop per reduction level{' (paired statistics share a loop)' if rw.pairs else ''}"
    text = rw.kernel_text(f"{name}_kernel", body, ["BLOCK_K", "BLOCK_R"], (),
                          f"Row reductions: {dom.k} rows of {dom.r} elements (shape {list(dom.shape)}, reduced "
                          f"dims {list(dom.dims)}); {mode}.")
    meta = {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": int(cfg.get("num_warps", 4))}
    nred = len([n for n in g.nodes if n.kind == REDUCE])
    launcher = rw.w.launcher(f"(triton.cdiv({rw.rows}, {block_k}),)", meta,
                             f"Launch {name}_kernel: {nred} reductions, {len(g.nodes)} ops.")
    return KernelSource(name, text, launcher, rw.w.bases, list(g.outputs), rw.w.helpers)


def _one_pass_body(rw: _RowWriter, body: list[str]) -> None:
    """The whole row is one tile: load once, reduce and write from registers, in node order."""
    g, w = rw.g, rw.w
    body += ["r = tl.arange(0, BLOCK_R)[None, :]", f"mask = kmask & (r < {rw.length})", "lin = kbase + RPART"]
    cache: dict[Any, str] = {}
    for n in g.nodes:
        if n.kind == REDUCE:
            init: list[str] = []
            lines: list[str] = []
            x = w.value(n.args[0], n.args[0].shape, FULL, body, cache, True)
            _accumulate(n, x, lines, init)
            body += init + lines + _finish(n)
            rw.kept_done.add(n.id)
        elif g.rank[n.id] == FULL:
            w.pointwise_line(n, body, cache)
        elif n.id not in rw.kept_done:
            rw.kept_done.add(n.id)
            w.pointwise_line(n, body, rw.kept_cache)
    body += [w.store(o, FULL) for o in rw.full_outs]


def _combine(rw: _RowWriter, reds: list[Node], slot: dict[int, int]) -> list[str]:
    """Kept values of ``reds`` from the SPLIT chunk partials in the workspace."""
    k_total = rw.rows
    out: list[str] = []

    def load(n: Node, other: str) -> str:
        out.append(f"p{n.id} = tl.load(ws_ptr + ({slot[n.id]} * {k_total} + k) * SPLIT + cs, mask=smask, "
                   f"other={other})")
        return f"p{n.id}"

    for r in reds:
        pair = rw.pairs.get(r.id)
        if pair is None:
            p = load(r, _IDENTITY[r.op])
            out.append(f"v{r.id} = {_REDUCE_FN[r.op]}({p}, axis=1)[:, None]  # {r.op} of the chunks' partials")
        elif pair.first is r and pair.kind == "welford":
            p1, p2, v1, v2, t = load(r, "0.0"), load(pair.second, "0.0"), f"v{r.id}", f"v{pair.second.id}", \
                f"t{r.id}"
            out += [f"{v1} = tl.sum({p1}, axis=1)[:, None]  # sum of the chunk sums",
                    _chunk_count(rw, t),
                    f"{t}_e = tl.where(smask, {p1} / tl.maximum({t}_n, 1.0) - {v1} / {_length_f(rw)}, 0.0)",
                    f"{v2} = tl.sum({p2} + {t}_n * {t}_e * {t}_e, axis=1)[:, None]  # Chan: M2 of the row"]
        elif pair.first is r:
            p1, p2, v1, v2, t = load(r, "-float('inf')"), load(pair.second, "0.0"), f"v{r.id}", \
                f"v{pair.second.id}", f"t{r.id}"
            out += [f"{v1} = tl.max({p1}, axis=1)[:, None]  # max of the chunk maxima",
                    f"{t}_z = tl.where({v1} == -float('inf'), 0.0, {v1})",
                    f"{v2} = tl.sum({p2} * tl.exp({p1} - {t}_z), axis=1)[:, None]  # rescaled chunk sums"]
    return out


def _chunk_count(rw: _RowWriter, t: str) -> str:
    if not rw.long_rows:
        return f"{t}_n = tl.minimum(CHUNK, {rw.dom.r} - cs * CHUNK).to(tl.float32)  # elements per chunk"
    # the chunk length is computed per call: the last chunks of a short batch may be empty
    return f"{t}_n = tl.maximum(tl.minimum(CHUNK, {rw.length} - cs * CHUNK), 0).to(tl.float32)  # elements per chunk"


def _length_f(rw: _RowWriter) -> str:
    return f"({rw.length} * 1.0)" if rw.long_rows else f"{float(rw.dom.r)}"


def partials_width(split: int, block_r: int) -> int:
    """BLOCK_S, the width of the [BLOCK_K, BLOCK_S] tile of a row block's partials: the row tile's width
    where the partials fit in it. A narrower tile gets its own layout, and Triton 3.6 then broadcast the
    combined statistics into the row tile through shared memory on every iteration (1024 shared stores in
    19_MobileNetV1's BatchNorm apply kernel: 143 us a launch on the H200, 2026-12-07, where its statistics
    kernel, the same loop without that, took 17-24 us; ``benchmarks/row_kernels_gpu.py``)."""
    return max(next_pow2(split), block_r)


def _split_kernels(rw: _RowWriter, cfg: dict[str, Any], split: int, chunk: int) -> KernelSource:
    g, dom, name = rw.g, rw.dom, rw.name
    block_k = int(cfg.get("BLOCK_K", 1))
    block_r = min(int(cfg.get("BLOCK_R", 1024)), next_pow2(dom.r))
    levels_ = rw.level_list()
    slot = {n.id: i for i, n in enumerate(n for _, reds in levels_ for n in reds)}
    prelude = ["c = tl.program_id(1)  # which chunk of the rows", "rlo = c * CHUNK",
               "cs = tl.arange(0, BLOCK_S)[None, :]", "smask = kmask & (cs < SPLIT)"]
    # rows as long as the batch: CHUNK is computed per call (SPLIT chunks of whole BLOCK_R tiles)
    consts = ["BLOCK_K", "BLOCK_R", "BLOCK_S", "SPLIT"] + ([] if rw.long_rows else ["CHUNK"])
    values = {"CHUNK": f"triton.cdiv(triton.cdiv({rw.length}, {split}), {block_r}) * {block_r}"} \
        if rw.long_rows else {}
    bodies: list[tuple[str, list[str], str, bool]] = []
    for i, (level, reds) in enumerate(levels_):
        rw.reset()
        body = list(prelude)
        rw.emit_kept(0, body)
        for prev_level, prev in levels_[:i]:
            body += _combine(rw, prev, slot)
            rw.emit_kept(prev_level, body)
        body += rw.walk(reds, [], "rlo + ", "CHUNK")
        rows = rw.rows
        body += [f"tl.store(ws_ptr + ({slot[r.id]} * {rows} + k) * SPLIT + c, v{r.id}, mask=kmask)  # partial"
                 for r in reds]
        bodies.append((f"{name}_stats{i}_kernel", body, f"level-{level} statistics of each chunk", True))
    rw.reset()
    body = list(prelude)
    rw.emit_kept(0, body)
    for level, reds in levels_:
        body += _combine(rw, reds, slot)
        rw.emit_kept(level, body)
    if rw.full_outs:
        body += rw.walk([], rw.full_outs, "rlo + ", "CHUNK")
    body += [rw.w.store(o, KEPT, "kmask & (k * 0 + c == 0)") for o in rw.kept_outs]
    bodies.append((f"{name}_kernel", body, "combine the partials and write the outputs", bool(rw.full_outs)))
    texts, launches = [], []
    meta: dict[str, int | str] = {"BLOCK_K": block_k, "BLOCK_R": block_r, "BLOCK_S": partials_width(split, block_r),
                                  "SPLIT": split,
                                  "CHUNK": chunk, "num_warps": int(cfg.get("num_warps", 4))}
    if rw.long_rows:
        del meta["CHUNK"]
    for kname, body, what, chunked in bodies:
        texts.append(rw.kernel_text(kname, body, consts, ("ws_ptr",),
                                    f"Split row reductions: {dom.k} rows of {dom.r} elements (shape "
                                    f"{list(dom.shape)}, reduced dims {list(dom.dims)}), each cut into SPLIT "
                                    f"chunks of CHUNK; this kernel: {what}.", tuple(values)))
        launches.append((kname, f"(triton.cdiv({rw.rows}, {block_k}), {split if chunked else 1})", meta))
    rows: int | str = dom.k if rw.w.lead is None else rw.rows
    workspace: dict[str, tuple[tuple[int | str, ...], str]] = {"ws": ((len(slot), rows, split), "torch.float32")}
    launcher = rw.w.launcher_multi(launches, f"Launch {name}: {len(bodies) - 1} statistics kernel(s) over "
                                             f"{split} chunks per row, then the combine/apply kernel.", workspace,
                                   values=values)
    return KernelSource(name, "\n\n".join(texts), launcher, rw.w.bases, list(g.outputs), rw.w.helpers)
