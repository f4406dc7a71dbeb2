"""Small KernelBench-format problems (and Triton candidates) the suite tests write on the fly."""

from __future__ import annotations

from pathlib import Path

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """y = {expr}"""

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({rows}, {cols})]


def get_init_inputs():
    return []
'''


def write_problem(path: Path, expr: str = "torch.relu(x)", rows: int = 7, cols: int = 33) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PROBLEM.format(expr=expr, rows=rows, cols=cols))
    return path


CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _elementwise_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = {kernel_expr} for i < n (x read as fp32)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, {kernel_expr}, mask=mask)


def elementwise(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _elementwise_kernel[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        return elementwise(x)
'''


def write_candidate(path: Path, kernel_expr: str) -> Path:
    """A Triton candidate computing ``kernel_expr`` (in terms of ``x``) elementwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CANDIDATE.format(kernel_expr=kernel_expr))
    return path
