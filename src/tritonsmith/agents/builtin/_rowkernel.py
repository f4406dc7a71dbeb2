"""The row kernel: any mix of reductions over one set of rows with the elementwise ops around them.

A program owns BLOCK_K rows (kept elements ``k``) and walks their BLOCK_R-wide chunks of reduced
elements ``r``. Values are tiles: "full" ones [BLOCK_K, BLOCK_R] (one per element) and "kept" ones
[BLOCK_K, 1] (one per row, results of reductions). Multi-pass: each level of dependent reductions
(softmax: max, then sum of exp(x - max)) is one loop over the row, recomputing its inputs from memory;
a last loop writes full-size outputs. One-pass: the whole row fits one tile and is loaded once.
"""

from __future__ import annotations

from typing import Any

from tritonsmith.agents.builtin._ir import REDUCE, Node
from tritonsmith.agents.builtin._kernels import KernelSource, _Writer, next_pow2
from tritonsmith.agents.builtin._partition import FULL, KEPT, Group, Plan, RowDomain

__all__ = ["row_kernel"]

_IDENTITY = {"sum": "0.0", "max": "-float('inf')", "min": "float('inf')"}


def _levels(g: Group) -> dict[int, int]:
    """Reduction depth of each node: 0 before any reduction, L after the L-th dependent one."""
    lv: dict[int, int] = {}
    for n in g.nodes:
        deps = [lv[a.id] for a in n.node_args() if g.has(a)]
        base = max(deps, default=0)
        lv[n.id] = base + 1 if n.kind == REDUCE else base
    return lv


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
        if g.rank[n.id] == FULL:
            need.add(n.id)
    return [n for n in g.nodes if n.id in need and n.kind != REDUCE]


def _index_lines(dom: RowDomain, i64: bool) -> tuple[list[str], str]:
    """Lines computing the kept part of the row-major index, and the expression of the reduced part."""
    def part(var: str, runs: tuple[tuple[int, int], ...]) -> str:
        if not runs:
            return "0"
        if len(runs) == 1:
            return var if runs[0][1] == 1 else f"{var} * {runs[0][1]}"
        (_, s0), (n1, s1) = runs
        inner = f"({var} % {n1})" + ("" if s1 == 1 else f" * {s1}")
        return f"({var} // {n1}) * {s0} + {inner}"

    pid = "tl.program_id(0).to(tl.int64)" if i64 else "tl.program_id(0)"
    lines = [f"k = {pid} * BLOCK_K + tl.arange(0, BLOCK_K)[:, None]",
             f"kmask = k < {dom.k}",
             f"kbase = {part('k', dom.kept_runs)}"]
    return lines, part("r", dom.red_runs)


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
    fn = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}[n.op]
    return [f"v{n.id} = {fn}({a}, axis=1)[:, None]  # {n.op} over the row"]


def row_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    dom = g.domain
    assert dom is not None
    w = _Writer(plan, g, name)
    w._check_size(dom.numel)
    block_r_full = next_pow2(dom.r)
    one_pass = bool(cfg.get("one_pass", block_r_full * int(cfg.get("BLOCK_K", 1)) <= 8192))
    block_r = block_r_full if one_pass else min(int(cfg.get("BLOCK_R", 1024)), block_r_full)
    block_k = int(cfg.get("BLOCK_K", 1))
    lv = _levels(g)
    body: list[str] = []
    kept_cache: dict[Any, str] = {}
    kept_done: set[int] = set()

    def emit_kept(level: int, out: list[str]) -> None:
        for n in g.nodes:
            if g.rank[n.id] == KEPT and n.kind != REDUCE and lv[n.id] <= level and n.id not in kept_done:
                kept_done.add(n.id)
                w.pointwise_line(n, out, kept_cache)

    emit_kept(0, body)
    reductions = [n for n in g.nodes if n.kind == REDUCE]
    full_outs = [o for o in g.outputs if g.rank[o.id] == FULL]
    if one_pass:
        body += [f"r = tl.arange(0, BLOCK_R)[None, :]", f"mask = kmask & (r < {dom.r})", f"lin = kbase + RPART"]
        cache: dict[Any, str] = {}
        for n in g.nodes:
            if n.kind == REDUCE:
                init: list[str] = []
                lines: list[str] = []
                x = w.value(n.args[0], n.args[0].shape, FULL, body, cache, True)
                _accumulate(n, x, lines, init)
                body += init + lines + _finish(n)
                kept_done.add(n.id)
            elif g.rank[n.id] == FULL:
                w.pointwise_line(n, body, cache)
            elif n.id not in kept_done:
                kept_done.add(n.id)
                w.pointwise_line(n, body, kept_cache)
        body += [w.store(o, FULL) for o in full_outs]
    else:
        for level in range(1, max(lv.values()) + 1):
            here = [n for n in reductions if lv[n.id] == level]
            if not here:
                continue
            body += _loop(w, g, dom, here, [], lv)
            emit_kept(level, body)
        if full_outs:
            body += _loop(w, g, dom, [], full_outs, lv)
    body += [w.store(o, KEPT) for o in g.outputs if g.rank[o.id] == KEPT]
    idx_lines, rpart = _index_lines(dom, w.idx64)
    body = idx_lines + [line.replace("RPART", rpart) for line in body]
    mode = "one pass: the row is one tile" if one_pass else "multi-pass: one loop per reduction level"
    src = [f"@triton.jit\ndef {name}_kernel({w.signature(['BLOCK_K', 'BLOCK_R'])}):",
           w.docstring(f"Row reductions: {dom.k} rows of {dom.r} elements (shape {list(dom.shape)}, reduced "
                       f"dims {list(dom.dims)}); {mode}.")] + [f"    {line}" for line in body]
    grid = f"(triton.cdiv({dom.k}, {block_k}),)"
    meta = {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": int(cfg.get("num_warps", 4))}
    launcher = w.launcher(grid, meta, f"Launch {name}_kernel: {len(reductions)} reductions, {len(g.nodes)} ops.")
    return KernelSource(name, "\n".join(src) + "\n", launcher, w.bases, list(g.outputs), w.helpers)


def _loop(w: _Writer, g: Group, dom: RowDomain, reds: list[Node], stores: list[Node], lv: dict[int, int]) -> list[str]:
    """One walk over the row: accumulate ``reds`` and/or store the full-rank ``stores``."""
    targets = [r.args[0] for r in reds if g.rank.get(r.args[0].id) == FULL] + stores
    cache: dict[Any, str] = {}
    inner: list[str] = [f"r = r0 + tl.arange(0, BLOCK_R)[None, :]", f"mask = kmask & (r < {dom.r})",
                        "lin = kbase + RPART"]
    for n in _needed_full(g, targets):
        w.pointwise_line(n, inner, cache)
    init: list[str] = []
    for n in reds:
        _accumulate(n, w.value(n.args[0], n.args[0].shape, FULL, inner, cache, True), inner, init)
    inner += [w.store(o, FULL) for o in stores]
    out = init + [f"for r0 in range(0, {dom.r}, BLOCK_R):"] + [f"    {line}" for line in inner]
    for n in reds:
        out += _finish(n)
    return out



