"""Cheat (GPU): memoisation keyed on the input's pointer and shape: honest for its first calls (the
trials), then returns a copy of the output it computed earlier for the same buffer. Problem: softmax
(large). Expected: rejected, rule benchmark_output_wrong (fresh contents are written into the same
buffers before every timed call)."""
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


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    _softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        key = (x.data_ptr(), tuple(x.shape))
        if self.calls > 8 and key in self.memo:
            return self.memo[key].clone()
        out = softmax(x)
        self.memo[key] = out
        return out
