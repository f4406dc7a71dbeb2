"""Triton: RMSNorm over the last dimension, one program per row."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    """y = x / sqrt(mean(x^2) + eps) * w."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]).contiguous()
    if weight.numel() != x2.shape[1]:
        raise ValueError(f"weight has {weight.numel()} features, input {x2.shape[1]}")
    y = torch.empty_like(x2)
    block = triton.next_power_of_2(x2.shape[1])
    _rms_norm_kernel[(x2.shape[0],)](x2, weight.contiguous(), y, x2.shape[1], x2.stride(0), float(eps),
                                     BLOCK=block, num_warps=8 if block >= 2048 else 4)
    return y.reshape(shape)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(features) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)
