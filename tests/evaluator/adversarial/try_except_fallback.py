"""Cheat: a broken kernel inside try/except that falls back to PyTorch. Problem: softmax.
Expected: rejected, rule pytorch_fallback."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    num = tl.exp(x - tl.max_of_everything(x))
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            out = torch.empty_like(x)
            _softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
            return out
        except Exception:
            return torch.softmax(x, dim=1)
