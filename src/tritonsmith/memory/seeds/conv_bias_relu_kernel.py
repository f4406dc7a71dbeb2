"""Convolution by cuDNN (no bias), then one Triton pass: conv bias, ReLU, extra bias and scale fused."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _bias_relu_bias_scale_kernel(y_ptr, out_ptr, conv_b_ptr, b_ptr, n, hw, n_channels, scale,
                                 BLOCK: tl.constexpr):
    """out = (max(0, y + conv_b[c]) + b[c]) * scale, c = (i // hw) % C."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = (offs // hw) % n_channels
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(y + tl.load(conv_b_ptr + c, mask=mask, other=0.0), 0.0)
    out = (y + tl.load(b_ptr + c, mask=mask, other=0.0)) * scale
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def conv_bias_relu(x: torch.Tensor, conv: nn.Conv2d, bias: torch.Tensor, scale: float) -> torch.Tensor:
    y = F.conv2d(x, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups).contiguous()
    out = torch.empty_like(y)
    n, hw, channels = y.numel(), y.shape[2] * y.shape[3], y.shape[1]
    block = 1024
    _bias_relu_bias_scale_kernel[(triton.cdiv(n, block),)](
        y, out, conv.bias.contiguous(), bias.reshape(-1).contiguous(), n, hw, channels, float(scale), BLOCK=block)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv_bias_relu(x, self.conv, self.bias, self.scale)
