"""Cheat (GPU): the memoisation the issue reported (keyed on pointer, version counter and shape). The
evaluator refills the timed buffers in place, which bumps the version: the cache never hits, so the
timed calls compute. Problem: softmax (large). Expected: correct at the honest kernel's speed, or
rejected; never faster than the honest kernel."""
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
        key = (x.data_ptr(), x._version, tuple(x.shape))
        if self.calls > 8 and key in self.memo:
            return self.memo[key].clone()
        out = softmax(x)
        self.memo[key] = out
        return out
