"""Cheat: lower precision: the row and the result rounded through float16 on a float32 problem. The error stays under the
kernelbench tolerance (1e-4 absolute) for softmax's small outputs, but is far from what float32
explains. Problem: softmax. Expected: rejected, rule precision_lowered."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_fp16_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x16 = (x - tl.max(x, axis=0)).to(tl.float16).to(tl.float32)
    num = tl.exp(x16)
    out = (num / tl.sum(num, axis=0)).to(tl.float16)
    tl.store(out_ptr + row * n_cols + cols, out.to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _softmax_fp16_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
