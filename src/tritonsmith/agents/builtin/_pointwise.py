"""Pointwise kernels: a group of elementwise ops (and views) over one output shape, one program per BLOCK
of its elements; the ``conv-cl`` variant walks them in channels-last order (``_convcl.py``)."""

from __future__ import annotations

__all__ = ["pointwise_kernel"]

from typing import Any

from tritonsmith.agents.builtin._convcl import CL_FORMAT, channels_last_order, eligible
from tritonsmith.agents.builtin._ir import UnsupportedError
from tritonsmith.agents.builtin._kernelbase import KernelSource, KernelWriter
from tritonsmith.agents.builtin._partition import FULL, Group, Plan


def pointwise_kernel(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    w = KernelWriter(plan, g, name)
    if cfg.get("channels_last"):
        _walk_channels_last(plan, g, w)
    body: list[str] = []
    cache: dict[Any, str] = {}
    for n in g.nodes:
        w.pointwise_line(n, body, cache)
    body += [w.store(o, FULL) for o in g.outputs]
    w.check_size(g.numel)
    block = int(cfg.get("BLOCK", 1024))
    pid = "tl.program_id(0).to(tl.int64)" if w.idx64 else "tl.program_id(0)"
    order = " (in channels-last memory order: outputs are channels-last)" if w.order else ""
    src = [f"@triton.jit\ndef {name}_kernel({w.signature(['BLOCK'])}):",
           w.docstring(f"Elementwise over {g.numel} elements{order}: one program per BLOCK of them."),
           f"    lin = {pid} * BLOCK + tl.arange(0, BLOCK)",
           f"    mask = lin < {w.size(g.numel)}"] + [f"    {line}" for line in body]
    launcher = w.launcher(f"(triton.cdiv({w.size(g.numel)}, {block}),)",
                          {"BLOCK": block, "num_warps": int(cfg.get("num_warps", 4))},
                          f"Launch {name}_kernel: {len(g.nodes)} fused elementwise ops.")
    return KernelSource(name, "\n".join(src) + "\n", launcher, w.bases, list(g.outputs), w.helpers)


def _walk_channels_last(plan: Plan, g: Group, w: KernelWriter) -> None:
    """conv-cl / net-cl: walk (and store) the elements in channels-last order, the order of the convolution's
    output; under net-cl only the groups its layout chose (``plan.cl_groups``), the others stay row-major."""
    if plan.cl_groups is not None:
        if g.index not in plan.cl_groups:
            return
    elif eligible(plan) is not g:
        raise UnsupportedError("conv-cl needs a convolution followed by one elementwise epilogue that "
                               "writes the model's outputs")
    rank = len(g.outputs[0].shape)
    w.order = channels_last_order(rank)
    w.out_format = CL_FORMAT[rank]

