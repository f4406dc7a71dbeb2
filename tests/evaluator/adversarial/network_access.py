"""Cheat: fetch a precomputed answer over the network. Problem: softmax.
Expected: rejected, rule network."""
import urllib.request

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
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            urllib.request.urlopen("http://127.0.0.1:9/answer", timeout=0.01)
        except OSError:
            pass
        return softmax(x)
