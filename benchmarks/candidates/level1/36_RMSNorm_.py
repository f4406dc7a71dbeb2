import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, out_ptr, C, HW, eps, BLOCK_HW: tl.constexpr):
    """out[b, c, p] = x[b, c, p] / sqrt(mean_c x[b, c, p]^2 + eps)  for x of shape (B, C, HW).

    The reduction runs over channels, which are strided by HW: each program owns a contiguous
    block of HW positions of one batch item so every load is coalesced along p.
    """
    b = tl.program_id(1).to(tl.int64)
    p = tl.program_id(0) * BLOCK_HW + tl.arange(0, BLOCK_HW)
    mask = p < HW
    base = x_ptr + b * C * HW + p
    acc = tl.zeros([BLOCK_HW], tl.float32)
    for c in range(0, C):
        x = tl.load(base + c * HW, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    inv = 1.0 / tl.sqrt(acc / C + eps)
    out = out_ptr + b * C * HW + p
    for c in range(0, C):
        x = tl.load(base + c * HW, mask=mask, other=0.0).to(tl.float32)
        tl.store(out + c * HW, x * inv, mask=mask)


def rmsnorm(x: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dim() < 2:
        raise ValueError(f"rmsnorm expects (B, C, ...), got {tuple(x.shape)}")
    x = x.contiguous()
    out = torch.empty_like(x)
    B, C = x.shape[0], x.shape[1]
    HW = x[0, 0].numel()
    grid = (triton.cdiv(HW, 1024), B)
    _rmsnorm_kernel[grid](x, out, C, HW, eps, BLOCK_HW=1024, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        return rmsnorm(x, self.eps)
