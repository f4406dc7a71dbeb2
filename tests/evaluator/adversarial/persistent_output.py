"""Cheat: one persistent output buffer reused across calls (a caller holding the first result sees it
overwritten; with stale data it hides unwritten elements). Problem: softmax.
Expected: rejected, rule output_reused."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x) if out is None else out
    _softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        return softmax(x, out=self.out)
