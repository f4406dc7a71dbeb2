"""Triton: BatchNorm2d. A statistics kernel (one program per channel) and a fused normalize+affine kernel."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bn_stats_kernel(x_ptr, mean_ptr, var_ptr, n_batch, n_channels, hw, BLOCK: tl.constexpr):
    """mean[c] = E[x[:, c]], var[c] = E[(x[:, c] - mean[c])^2] over N*H*W (two passes, fp32)."""
    c = tl.program_id(0)
    count = n_batch * hw
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, count, BLOCK):
        i = start + tl.arange(0, BLOCK)
        mask = i < count
        offs = (i // hw) * n_channels * hw + c * hw + i % hw
        acc += tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / count
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, count, BLOCK):
        i = start + tl.arange(0, BLOCK)
        mask = i < count
        offs = (i // hw) * n_channels * hw + c * hw + i % hw
        d = tl.where(mask, tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) - mean, 0.0)
        acc2 += d * d
    tl.store(mean_ptr + c, mean)
    tl.store(var_ptr + c, tl.sum(acc2, axis=0) / count)


@triton.jit
def _bn_apply_kernel(x_ptr, y_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, n, n_channels, hw, BLOCK: tl.constexpr):
    """y = (x - mean[c]) * rstd[c] * w[c] + b[c] with c = (i // hw) % C."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = (offs // hw) % n_channels
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    scale = tl.load(rstd_ptr + c, mask=mask, other=0.0) * tl.load(w_ptr + c, mask=mask, other=0.0)
    y = (x - tl.load(mean_ptr + c, mask=mask, other=0.0)) * scale + tl.load(b_ptr + c, mask=mask, other=0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def batch_norm_2d(x: torch.Tensor, bn: nn.BatchNorm2d) -> torch.Tensor:
    """Training mode uses batch statistics (and updates the running ones, as PyTorch does); eval mode the running ones."""
    if x.dim() != 4 or x.shape[1] != bn.num_features:
        raise ValueError(f"expected (N, {bn.num_features}, H, W), got {tuple(x.shape)}")
    x = x.contiguous()
    n_batch, channels, h, w = x.shape
    if bn.training:
        mean = torch.empty(channels, device=x.device, dtype=torch.float32)
        var = torch.empty_like(mean)
        _bn_stats_kernel[(channels,)](x, mean, var, n_batch, channels, h * w, BLOCK=1024)
        count = n_batch * h * w
        with torch.no_grad():
            m = bn.momentum if bn.momentum is not None else 0.1
            bn.running_mean.mul_(1 - m).add_(mean, alpha=m)
            bn.running_var.mul_(1 - m).add_(var * (count / max(count - 1, 1)), alpha=m)
            bn.num_batches_tracked.add_(1)
    else:
        mean, var = bn.running_mean.float(), bn.running_var.float()
    rstd = torch.rsqrt(var + bn.eps)
    y = torch.empty_like(x)
    block = 1024
    _bn_apply_kernel[(triton.cdiv(x.numel(), block),)](
        x, y, mean, rstd, bn.weight.float().contiguous(), bn.bias.float().contiguous(), x.numel(), channels, h * w,
        BLOCK=block)
    return y


class ModelNew(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return batch_norm_2d(x, self.bn)
