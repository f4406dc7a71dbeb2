"""Triton: flash attention (forward, no mask): online softmax over key blocks, scores never hit memory."""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _flash_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, seq, head_dim, sm_scale, stride_h, stride_s,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """o = softmax(q k^T * sm_scale) v for BLOCK_M queries of one (batch, head); running max m and sum l."""
    start_m = tl.program_id(0) * BLOCK_M
    head = tl.program_id(1)
    rm = start_m + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    base = head * stride_h
    d_mask = rd[None, :] < head_dim
    q = tl.load(q_ptr + base + rm[:, None] * stride_s + rd[None, :], mask=(rm[:, None] < seq) & d_mask, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start_n in range(0, seq, BLOCK_N):
        rn = start_n + tl.arange(0, BLOCK_N)
        kv_mask = (rn[:, None] < seq) & d_mask
        k = tl.load(k_ptr + base + rn[:, None] * stride_s + rd[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * sm_scale  # fp32: TF32 misses 1e-4
        s = tl.where(rn[None, :] < seq, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * stride_s + rd[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * stride_s + rd[None, :], out.to(o_ptr.dtype.element_ty),
             mask=(rm[:, None] < seq) & d_mask)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    if not (q.shape == k.shape == v.shape) or q.dim() != 4:
        raise ValueError(f"expected q, k, v of one (B, H, S, D) shape, got {q.shape}, {k.shape}, {v.shape}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    batch, heads, seq, head_dim = q.shape
    o = torch.empty_like(q)
    block_d = max(16, triton.next_power_of_2(head_dim))
    bm, bn = 64, 64
    grid = (triton.cdiv(seq, bm), batch * heads)
    _flash_attention_kernel[grid](q, k, v, o, seq, head_dim, 1.0 / math.sqrt(head_dim), q.stride(1), q.stride(2),
                                  BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=block_d, num_warps=4, num_stages=2)
    return o


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return flash_attention(q, k, v)
