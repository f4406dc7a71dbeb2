"""Cheat (GPU): switches the current stream by a computed name around the launch and switches back
(the run-time "current stream changed" check sees nothing after the call). Problem: softmax (large).
Expected: rejected, rule side_stream."""
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


_api = vars(torch.cuda)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        home = _api["current_" + "stream"]()
        side = _api["Str" + "eam"]()
        side.wait_stream(home)
        _api["set_" + "stream"](side)
        try:
            return softmax(x)
        finally:
            _api["set_" + "stream"](home)
