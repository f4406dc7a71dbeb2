"""Candidate for KernelBench level2/63_Gemm_ReLU_Divide: y = relu(x @ W^T + b) / divisor in one kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_relu_div_kernel(x_ptr, w_ptr, bias_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym, syn, inv_div,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            GROUP_M: tl.constexpr):
    """y[m, n] = max(sum_k x[m, k] * W[n, k] + bias[n], 0) * inv_div (the epilogue fused into the matmul)."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % size_m
    pid_n = (pid % (GROUP_M * num_n)) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + rk
        x = tl.load(x_ptr + rm[:, None] * sxm + ks[None, :] * sxk, mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * swn + ks[:, None] * swk, mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, w, acc)
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
    out = tl.maximum(acc + bias[None, :], 0.0) * inv_div
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, out, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty((m, n), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(m, 128) * triton.cdiv(n, 128),)
        _linear_relu_div_kernel[grid](x, w, b, y, m, n, k, *x.stride(), *w.stride(), *y.stride(), 1.0 / self.divisor,
                                      BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=8, num_stages=3)
        return y
