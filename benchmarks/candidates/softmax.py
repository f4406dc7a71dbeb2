"""Candidate for KernelBench level1/23_Softmax (softmax over dim 1 of a long row).

One program per row; pass 1 keeps a running max m and sum s = sum(exp(x - m)) (online softmax),
pass 2 writes exp(x - m) / s. The row is read twice: 3 row-sized transfers against the minimum 2.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    """y[r, c] = exp(x[r, c] - max_c x[r]) / sum_c exp(x[r, c] - max_c x[r])."""
    row = tl.program_id(0).to(tl.int64)
    base = row * cols
    offs0 = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + offs0
        x = tl.load(x_ptr + base + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes that have only seen -inf keep s = 0 (avoid inf - inf)
        s = s * tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new)) + tl.where(x == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    for start in range(0, cols, BLOCK):
        offs = start + offs0
        mask = offs < cols
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + offs, tl.exp(x - row_max) / row_sum, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        _softmax_kernel[(rows,)](x, y, cols, BLOCK=2048, num_warps=8)
        return y
