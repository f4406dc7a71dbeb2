"""Channels-last hybrid convolutions: the ``conv-cl`` variant.

cuDNN runs a dense 2-D or 3-D convolution 1.3-1.7x faster on channels-last operands than on NCHW ones
(H200, 2026-12-03/04, ``benchmarks/conv_layout_gpu.py``), and TorchInductor relies on that: it copies the
input to channels-last with a Triton kernel of its own, calls the convolution without its bias, and fuses
the bias into the epilogue that reads the channels-last result. This variant does the same:

- the input goes through ``_to_channels_last`` (below: one tiled transpose kernel per call, loads along
  positions and stores along channels), so cuDNN picks its channels-last kernels; its output is
  channels-last too;
- the elementwise epilogue walks the elements in that memory order (channel fastest) and writes its
  output in the same layout: every load and store of the big tensors is contiguous. The output has the
  reference's shape and values; only its strides are channels-last.

The epilogue may only be a single pointwise group of same-shaped elementwise ops whose outputs are the
model's outputs (a later kernel would index them as contiguous); otherwise the variant is not offered.
"""

from __future__ import annotations

import torch

from tritonsmith.agents.builtin._ir import EXTERN, PW, VIEW, Node
from tritonsmith.agents.builtin._partition import POINTWISE, TORCH, Group, Plan, resolve_base

__all__ = ["CL_CONV_OPS", "TO_CHANNELS_LAST", "channels_last_order", "channels_last_strides", "eligible"]

CL_CONV_OPS = ("conv", "conv_transpose")

# Module-level source added to a candidate whose convolution reads a channels-last copy of its input.
TO_CHANNELS_LAST = '''

@triton.jit
def _to_channels_last_kernel(x_ptr, y_ptr, C, S, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    """y[n, s, c] = x[n, c, s] for one image n, a BLOCK_C x BLOCK_S tile of (channel, position).

    x is (N, C, S) contiguous, S the spatial positions; y holds the same values channels-last (N, S, C).
    """
    n = tl.program_id(2).to(tl.int64)
    cs = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    ss = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = (cs[:, None] < C) & (ss[None, :] < S)
    base = n * C * S
    # the load runs along positions and the store along channels: Triton stages the tile in shared memory
    tile = tl.load(x_ptr + base + cs[:, None] * S + ss[None, :], mask=mask)
    tl.store(y_ptr + base + ss[None, :] * C + cs[:, None], tile, mask=mask)


def _to_channels_last(x: torch.Tensor) -> torch.Tensor:
    """A channels-last copy of a contiguous (N, C, *spatial) tensor, 2-D or 3-D spatial: same shape and values."""
    if x.dim() not in (4, 5) or not x.is_contiguous():
        raise ValueError(f"_to_channels_last: expected a contiguous 4-D or 5-D tensor, got shape "
                         f"{tuple(x.shape)} with strides {tuple(x.stride())}")
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    y = torch.empty_like(x, memory_format=fmt)
    n, c = x.shape[0], x.shape[1]
    s = x[0, 0].numel()
    if y.numel():
        grid = (triton.cdiv(s, 64), triton.cdiv(c, 32), n)
        _to_channels_last_kernel[grid](x, y, c, s, BLOCK_C=32, BLOCK_S=64, num_warps=4)
    return y
'''


def channels_last_order(rank: int) -> tuple[int, ...]:
    """Dimensions from slowest to fastest in channels-last memory: (0, 2, ..., rank - 1, 1)."""
    return (0, *range(2, rank), 1)


def channels_last_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a dense channels-last tensor of ``shape`` (rank 4 or 5)."""
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    return tuple(torch.empty(shape, device="meta").contiguous(memory_format=fmt).stride())


def _cl_conv(n: Node) -> bool:
    return n.kind == EXTERN and n.attrs.get("op") in CL_CONV_OPS and len(n.shape) in (4, 5)


def eligible(plan: Plan) -> Group | None:
    """The one pointwise epilogue a channels-last convolution can feed, or None when the plan has another
    shape: a 2-D or 3-D dense convolution (a torch call), then a single Triton group, pointwise, of
    elementwise ops all of the convolution's output shape, reading it, and storing only model outputs."""
    convs = [g.nodes[0] for g in plan.groups if g.kind == TORCH]
    triton_groups = [g for g in plan.groups if g.kind != TORCH]
    if not convs or not all(_cl_conv(n) for n in convs) or len(triton_groups) != 1:
        return None
    g = triton_groups[0]
    shape = g.outputs[0].shape if g.outputs else None
    if g.kind != POINTWISE or shape is None or len(shape) not in (4, 5):
        return None
    if any(n.kind != PW or n.op in ("cat", "iota") or n.shape != shape for n in g.nodes):
        return None
    outputs = {id(o) for o in plan.graph.outputs}
    if not all(id(o) in outputs for o in g.outputs) or len(g.outputs) != len(plan.graph.outputs):
        return None
    reads_conv = any(isinstance(a, Node) and _cl_conv(resolve_base(a, plan.owner)) for n in g.nodes for a in n.args)
    return g if reads_conv and all(n.kind != VIEW for n in g.outputs) else None
