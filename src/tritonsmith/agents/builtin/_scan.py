"""Scans: cumulative sum and product along one dimension, as one Triton kernel per scan group.

The rows are the scan's (the other dims flattened, addressed through their strides, as the row
kernels' ``RowDomain``). A program owns BLOCK_K rows and walks them in BLOCK_R-wide blocks: each block
is scanned in registers (``tl.cumsum`` / ``tl.cumprod``, fp32), combined with the running total (or
product) of the blocks before it, and that block's last prefix is carried to the next one. The
elementwise ops before the scan (its prologue, e.g. a mask) and after it (epilogue) run in the same
loop, so the input is read once and the output written once.
"""

from __future__ import annotations

from typing import Any

from tritonsmith.agents.builtin._ir import SCAN, Node
from tritonsmith.agents.builtin._kernelbase import KernelSource, KernelWriter, row_index_lines
from tritonsmith.agents.builtin._partition import FULL, Group, Plan

__all__ = ["scan_kernel"]

_SCAN = {"sum": ("tl.cumsum", "0.0", "+"), "prod": ("tl.cumprod", "1.0", "*")}


def _scan_lines(w: KernelWriter, n: Node, lines: list[str], cache: dict[Any, str]) -> None:
    """The block's inclusive scan of ``n``'s input, offset by the carry; then the new carry."""
    fn, ident, op = _SCAN[n.op]
    x = w.value(n.args[0], n.args[0].shape, FULL, lines, cache, True)
    lines += [f"s{n.id} = {fn}(tl.where(mask, {x}, {ident}), axis=1)  # inclusive cum{n.op} within the block",
              f"v{n.id} = carry {op} s{n.id}  # plus the blocks before",
              # masked lanes hold the identity, so the last lane is the prefix up to the block's end
              f"carry = tl.sum(tl.where(lane == BLOCK_R - 1, v{n.id}, 0.0), axis=1)[:, None]"]


def scan_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    dom = g.domain
    assert dom is not None
    w = KernelWriter(plan, g, name)
    w.check_size(dom.numel)
    scan = next(n for n in g.nodes if n.kind == SCAN)
    ident = _SCAN[scan.op][1]
    inner = ["r = r0 + lane", f"mask = kmask & (r < {dom.r})", "lin = kbase + RPART"]
    cache: dict[Any, str] = {}
    for n in g.nodes:
        if n is scan:
            _scan_lines(w, n, inner, cache)
        else:
            w.pointwise_line(n, inner, cache)
    inner += [w.store(o, FULL) for o in g.outputs]
    idx_lines, rpart = row_index_lines(g, w.idx64, w.size(dom.k))
    body = idx_lines + ["lane = tl.arange(0, BLOCK_R)[None, :]",
                        f"carry = tl.full([BLOCK_K, 1], {ident}, tl.float32)  # cum{scan.op} of the rows so far",
                        f"for r0 in range(0, {dom.r}, BLOCK_R):"]
    body += [f"    {line.replace('RPART', rpart)}" for line in inner]
    others = len(g.nodes) - 1
    title = (f"Inclusive cum{scan.op} along dim {scan.dims[0]} of {list(dom.shape)}: {dom.k} rows of {dom.r}; "
             f"out[k, r] = {'sum' if scan.op == 'sum' else 'prod'} of x[k, 0..r] in fp32, block by block with a "
             f"carried running {'total' if scan.op == 'sum' else 'product'}; {others} fused elementwise ops.")
    text = "\n".join([f"@triton.jit\ndef {name}_kernel({w.signature(['BLOCK_K', 'BLOCK_R'])}):",
                      w.docstring(title)] + [f"    {line}" for line in body]) + "\n"
    block_k, block_r = int(cfg.get("BLOCK_K", 1)), int(cfg.get("BLOCK_R", 1024))
    launcher = w.launcher(f"(triton.cdiv({w.size(dom.k)}, {block_k}),)",
                          {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": int(cfg.get("num_warps", 4))},
                          f"Launch {name}_kernel: cum{scan.op} over {dom.k} rows + {others} fused ops.")
    return KernelSource(name, text, launcher, w.bases, list(g.outputs), w.helpers)
