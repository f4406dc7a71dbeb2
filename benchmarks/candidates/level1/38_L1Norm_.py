import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _l1norm_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """out[r, c] = x[r, c] / mean_c |x[r, c]|  — one program per row, two streaming passes."""
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * n_cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.abs(tl.load(base + cols, mask=cols < n_cols, other=0.0).to(tl.float32))
    inv = n_cols / tl.sum(acc, axis=0)
    out = out_ptr + row * n_cols
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(base + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out + cols, x * inv, mask=mask)


def l1norm(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 2:
        raise ValueError(f"l1norm expects a 2-D tensor, got {tuple(x.shape)}")
    x = x.contiguous()
    out = torch.empty_like(x)
    _l1norm_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=2048, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return l1norm(x)
