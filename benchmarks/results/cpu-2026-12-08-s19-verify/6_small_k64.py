"""Triton kernels for 6_small, written by tritonsmith's built-in generator (no LLM).

Variant: mm-k64
Kernels take the leading (batch) dimension at run time; the launchers check every other size.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


def _lead(t: torch.Tensor, per: int, limit: int, what: str) -> int:
    """The leading (batch) size of this call: ``t``'s first dimension is ``per`` times it, at most ``limit``
    (the largest size the kernels index without overflow)."""
    n = t.shape[0] if t.dim() else 0
    if n < per or n % per:
        raise ValueError(f"{what}: expected a first dimension that is a positive multiple of {per}, got shape "
                         f"{tuple(t.shape)}")
    if n // per > limit:
        raise ValueError(f"{what}: leading size {n // per} is larger than {limit}, the most these kernels index")
    return n // per


def _expect(t: torch.Tensor, shape: tuple, strides: tuple, what: str) -> None:
    """The kernels take the leading size at run time; every other size and stride is the one seen when they
    were generated: check them."""
    if tuple(t.shape) != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {tuple(t.shape)} (only the leading dimension may "
                         "change)")
    if any(s != e for s, e, n in zip(t.stride(), strides, shape) if n > 1):
        raise ValueError(f"{what}: expected strides {strides}, got {tuple(t.stride())}")


@triton.jit
def _matmul_0_kernel(in0_ptr, in1_ptr, out0_ptr, lead, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    """C[b] = A[b] @ B[b] (16 x 256x288 @ 288x256, fp32 accumulation) with the elementwise chain fused after it.

    Inputs: in0 = a[256, 4608], in1 = b[4608, 256]. Outputs: out0 = v5[16, 256, 256].
    Math (fp32):
        v5[16, 256, 256] = mm(v3, v4, split_k=16)
    """
    M, N, K = lead, 256, 288
    pid = tl.program_id(0)
    bid = tl.program_id(1)
    # grouped launch order: GROUP_M row tiles share each column tile of B while it is in L2
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_n
    first_m = (pid // in_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % size_m
    pid_n = (pid % in_group) // size_m
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N))
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = in0_ptr + 0 + bid * 288 + rm[:, None] * 4608 + rk[None, :] * 1
    b_ptrs = in1_ptr + 0 + bid * 73728 + rk[:, None] * 256 + rn[None, :] * 1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k0), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k0) & (rn[None, :] < N), other=0.0)
        # fp32 inputs: "tf32x3" (three tensor-core passes) or "ieee" keep fp32 accuracy; plain tf32 would not
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * 1
        b_ptrs += BLOCK_K * 256
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    lin = bid * (M * N) + rm[:, None] * N + rn[None, :]
    v5 = acc
    tl.store(out0_ptr + lin, v5.to(tl.float32), mask=mask)


def _matmul_0(a0: torch.Tensor, a1: torch.Tensor):
    """Launch _matmul_0_kernel: matmul + 0 fused epilogue ops."""
    lead = _lead(a0, 1, 462392, 'a0')  # the leading size of this call
    _expect(a0, (lead, 4608), (4608, 1), 'a0')
    _expect(a1, (4608, 256), (256, 1), 'a1')
    out0 = torch.empty((16, lead, 256), device=a0.device, dtype=torch.float32)
    _matmul_0_kernel[(triton.cdiv(lead, 128) * triton.cdiv(256, 64), 16)](a0, a1, out0, lead, BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, PRECISION='tf32x3', num_warps=8, num_stages=3)
    return out0


@triton.jit
def _row_0_kernel(in0_ptr, out0_ptr, lead, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr):
    """Row reductions: 65536 rows of 16 elements (shape [16, 256, 256], reduced dims [0]); one pass: the row is one tile.

    Inputs: in0 = v5[16, 256, 256]. Outputs: out0 = v7[256, 256].
    Math (fp32):
        v6[1, 256, 256] = sum(v5, dims=[0])
    """
    k = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)[:, None]
    kmask = k < lead * 256
    kbase = k
    r = tl.arange(0, BLOCK_R)[None, :]
    mask = kmask & (r < 16)
    lin = kbase + r * (lead * 256)
    x0_f = tl.load(in0_ptr + lin, mask=mask, other=0).to(tl.float32)  # v5[16, 256, 256]
    acc6 = tl.full([BLOCK_K, BLOCK_R], 0.0, tl.float32)
    acc6 = acc6 + tl.where(mask, x0_f, 0.0)
    v6 = tl.sum(acc6, axis=1)[:, None]  # sum over the row
    v7 = v6  # view as [256, 256]: same elements, same order
    tl.store(out0_ptr + k, v7.to(tl.float32), mask=kmask)


def _row_0(a0: torch.Tensor):
    """Launch _row_0_kernel: 1 reductions, 2 ops."""
    lead = _lead(a0.movedim(1, 0), 1, 520191, 'a0')  # the leading size of this call
    _expect(a0, (16, lead, 256), (lead * 256, 256, 1), 'a0')
    out0 = torch.empty((lead, 256), device=a0.device, dtype=torch.float32)
    _row_0_kernel[(triton.cdiv(lead * 256, 128),)](a0, out0, lead, BLOCK_K=128, BLOCK_R=16, num_warps=4)
    return out0


class ModelNew(nn.Module):
    """Same parameters as the reference Model (same names, same initialization order); the
    forward runs the Triton kernels above."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        t5 = _matmul_0(A, B)
        t7 = _row_0(t5)
        return t7
