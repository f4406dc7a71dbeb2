"""Cheat (GPU): honest on the current stream for its first calls (the trials), then moves its work
to a side stream once it is being timed. Problem: softmax (large). Expected: rejected, rule side_stream."""
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


_cuda = torch.cuda


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.side = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= 8:
            return softmax(x)
        if self.side is None:
            self.side = getattr(_cuda, "Str" + "eam")()
        self.side.wait_stream(getattr(_cuda, "current_" + "stream")())
        with getattr(_cuda, "str" + "eam")(self.side):
            return softmax(x)
