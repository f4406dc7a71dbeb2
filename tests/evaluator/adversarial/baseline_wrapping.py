"""Cheat: torch computes the softmax, a Triton copy kernel makes it look like a kernel (baseline
wrapping). Static checks see a launched kernel; at run time PyTorch runs every compute op of the
reference. Problem: softmax. Expected: rejected, rule torch_does_the_work (hybrid) / torch_compute (strict)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def _copy(src: torch.Tensor) -> torch.Tensor:
    dst = torch.empty_like(src)
    n = src.numel()
    _copy_kernel[(triton.cdiv(n, 1024),)](src, dst, n, BLOCK=1024)
    return dst


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _copy(F.softmax(x, dim=1))
