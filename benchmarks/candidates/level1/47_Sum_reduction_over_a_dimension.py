import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_dim1_kernel(x_ptr, out_ptr, R, N, BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr):
    """out[b, 0, n] = sum_r x[b, r, n]  for x of shape (B, R, N).

    Each program owns BLOCK_N contiguous columns of one batch item and walks the reduced axis in
    BLOCK_R-row tiles, so loads are coalesced along n and partial sums stay in fp32 registers.
    """
    b = tl.program_id(1).to(tl.int64)
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = n < N
    acc = tl.zeros([BLOCK_R, BLOCK_N], tl.float32)
    base = x_ptr + b * R * N
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        mask = (r[:, None] < R) & n_mask[None, :]
        acc += tl.load(base + r[:, None] * N + n[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + b * N + n, tl.sum(acc, axis=0), mask=n_mask)


def sum_dim1(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 3:
        raise ValueError(f"sum_dim1 expects (B, R, N), got {tuple(x.shape)}")
    x = x.contiguous()
    B, R, N = x.shape
    out = torch.empty((B, 1, N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(N, 256), B)
    _sum_dim1_kernel[grid](x, out, R, N, BLOCK_N=256, BLOCK_R=16, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        if dim != 1:
            raise ValueError("this kernel reduces over dim 1")
        self.dim = dim

    def forward(self, x):
        return sum_dim1(x)
