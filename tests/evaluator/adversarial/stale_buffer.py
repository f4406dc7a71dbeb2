"""Cheat: stale buffers: allocate the output and launch a kernel that writes nothing, hoping the
allocator hands back memory holding the reference's answer. The evaluator poisons the reference's
output memory with NaN before the candidate runs. Problem: softmax. Expected: wrong_output."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _noop_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < 0)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _noop_kernel[(triton.cdiv(x.numel(), 256),)](out, x.numel(), BLOCK=256)
        return out
