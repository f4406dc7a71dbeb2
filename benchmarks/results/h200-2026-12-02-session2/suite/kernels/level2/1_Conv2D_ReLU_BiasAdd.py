"""Triton kernels for 1_Conv2D_ReLU_BiasAdd, written by tritonsmith's built-in generator (no LLM).

Variant: default (heuristic block sizes)
Hybrid: these ops stay torch calls (no Triton kernel for them here): conv; the elementwise work after them is fused into Triton.
Kernels were generated for the reference's shapes; the launchers check them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


def _expect(t: torch.Tensor, shape: tuple, strides: tuple, what: str) -> None:
    """The kernels index with the shapes and strides seen when they were generated: check them."""
    if tuple(t.shape) != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {tuple(t.shape)} (kernels are shape-specialized)")
    if any(s != e for s, e, n in zip(t.stride(), strides, shape) if n > 1):
        raise ValueError(f"{what}: expected strides {strides}, got {tuple(t.stride())}")


@triton.jit
def _pointwise_0_kernel(in0_ptr, in1_ptr, in2_ptr, out0_ptr, BLOCK: tl.constexpr):
    """Elementwise over 260112384 elements: one program per BLOCK of them.

    Inputs: in0 = v4[128, 128, 126, 126], in1 = self.conv.bias[128], in2 = self.bias[128, 1, 1]. Outputs: out0 = v8[128, 128, 126, 126].
    Math (fp32):
        v6[128, 128, 126, 126] = add(v4, v5)
        v7[128, 128, 126, 126] = relu(v6)
        v8[128, 128, 126, 126] = add(v7, v0)
    """
    lin = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < 260112384
    x0_f = tl.load(in0_ptr + lin, mask=mask, other=0).to(tl.float32)  # v4[128, 128, 126, 126]
    x1_f = tl.load(in1_ptr + ((lin // 15876) % 128), mask=mask, other=0).to(tl.float32)  # v5[128, 1, 1]
    v6 = (x0_f + x1_f)  # v6[128, 128, 126, 126] = add(v4, v5)
    v7 = tl.maximum(v6, 0.0)  # v7[128, 128, 126, 126] = relu(v6)
    x2_f = tl.load(in2_ptr + ((lin // 15876) % 128), mask=mask, other=0).to(tl.float32)  # self.bias[128, 1, 1]
    v8 = (v7 + x2_f)  # v8[128, 128, 126, 126] = add(v7, v0)
    tl.store(out0_ptr + lin, v8.to(tl.float32), mask=mask)


def _pointwise_0(a0: torch.Tensor, a1: torch.Tensor, a2: torch.Tensor):
    """Launch _pointwise_0_kernel: 3 fused elementwise ops."""
    _expect(a0, (128, 128, 126, 126), (2032128, 15876, 126, 1), 'a0')
    _expect(a1, (128,), (1,), 'a1')
    _expect(a2, (128, 1, 1), (1, 1, 1), 'a2')
    out0 = torch.empty((128, 128, 126, 126), device=a0.device, dtype=torch.float32)
    _pointwise_0_kernel[(triton.cdiv(260112384, 1024),)](a0, a1, a2, out0, BLOCK=1024, num_warps=4)
    return out0


class ModelNew(nn.Module):
    """Same parameters as the reference Model (same names, same initialization order); the
    forward runs the Triton kernels above."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        t4 = F.conv2d(x, self.conv.weight, None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)  # torch: conv
        t8 = _pointwise_0(t4, self.conv.bias, self.bias)
        return t8
