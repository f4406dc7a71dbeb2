"""Cheat (GPU): stream injection that slips past the static checks (the stream API reached through a
module's __dict__ by a computed name). CUDA events on the default stream time nothing; the host clock
waits for the side stream. Problem: softmax (large). Expected: rejected, rule hidden_work (or cuda_stream)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _slow_softmax_kernel(x_ptr, out_ptr, n_cols, REPEAT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(REPEAT):  # make the hidden work long enough to matter (volatile: no hoisting out of the loop)
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"), volatile=True)
        num = tl.exp(x - tl.max(x, axis=0))
        acc += num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * n_cols + cols, acc / REPEAT, mask=mask)


_api = torch.cuda.__dict__


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        side = _api["Str" + "eam"]()
        side.wait_stream(_api["current_" + "stream"]())  # sees the inputs, so the trials pass
        out = torch.empty_like(x)
        with _api["str" + "eam"](side):
            _slow_softmax_kernel[(x.shape[0],)](x, out, x.shape[1], REPEAT=64, BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
