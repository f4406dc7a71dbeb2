"""Kernel source for one fusion group: the family of its kind picks the writer.

Every family writes on ``_kernelbase`` (shared writer state, launcher, source record) and none imports
another: pointwise (``_pointwise``), matmul (``_matmul``), row reductions and normalizations
(``_rowkernel``), pooling windows (``_window``), depthwise convolution windows (``_dwconv``), scans
(``_scan``) and implicit-GEMM convolutions (``_convgemm``). A new family is one module and one line here.
"""

from __future__ import annotations

__all__ = ["kernel_for"]

from typing import Any

from tritonsmith.agents.builtin._convgemm import conv_kernel
from tritonsmith.agents.builtin._dwconv import dwconv_kernel
from tritonsmith.agents.builtin._ir import UnsupportedError
from tritonsmith.agents.builtin._kernelbase import KernelSource
from tritonsmith.agents.builtin._matmul import matmul_kernel
from tritonsmith.agents.builtin._partition import CONVS, MATMUL, POINTWISE, ROW, SCANS, WINDOWS, Group, Plan
from tritonsmith.agents.builtin._pointwise import pointwise_kernel
from tritonsmith.agents.builtin._rowkernel import row_kernel
from tritonsmith.agents.builtin._scan import scan_kernel
from tritonsmith.agents.builtin._window import window_kernel


def kernel_for(plan: Plan, g: Group, name: str, cfg: dict[str, Any]) -> KernelSource:
    if g.kind == POINTWISE:
        return pointwise_kernel(plan, g, name, cfg)
    if g.kind == MATMUL:
        return matmul_kernel(plan, g, name, cfg)
    if g.kind == ROW:
        return row_kernel(plan, g, name, cfg)
    if g.kind == WINDOWS and g.nodes[0].op == "dwconv":
        return dwconv_kernel(plan, g, name, cfg)
    if g.kind == WINDOWS:
        return window_kernel(plan, g, name, cfg)
    if g.kind == SCANS:
        return scan_kernel(plan, g, name, cfg)
    if g.kind == CONVS:
        return conv_kernel(plan, g, name, cfg)
    raise UnsupportedError(f"no kernel for a {g.kind} group")

