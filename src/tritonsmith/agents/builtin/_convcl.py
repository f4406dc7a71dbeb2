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

The ``net-cl`` variant does the same across a whole network (``plan_network``): every dense convolution
runs channels-last, every pointwise group of 4-D/5-D elementwise ops that reads a channels-last value walks
and stores channels-last too, so the next convolution takes that output as it is (no transpose) and every
other kernel (BatchNorm's statistics, pooling windows) reads it through its strides. A value stays
contiguous where a reader could not take it channels-last (another torch call, a reshape that would need
a copy); only the convolutions whose input is still contiguous pay for a transpose.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tritonsmith.agents.builtin._ir import EXTERN, PW, VIEW, Node, contiguous_strides
from tritonsmith.agents.builtin._partition import (
    FULL, POINTWISE, ROW, TORCH, WINDOWS, Group, Plan, apply_view, layout, resolve_base,
)

__all__ = ["CL_CONV_OPS", "CL_FORMAT", "TO_CHANNELS_LAST", "NetLayout", "apply_network", "channels_last_order",
           "channels_last_strides", "eligible", "plan_network"]

CL_CONV_OPS = ("conv", "conv_transpose")
CL_FORMAT = {4: "torch.channels_last", 5: "torch.channels_last_3d"}  # by rank, as generated code names it

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


# -- net-cl: channels-last across a whole network ------------------------------------------------------
_CL_KINDS = (POINTWISE, ROW, WINDOWS)  # kernels that store a full-rank output at channels-last addresses


@dataclass(frozen=True)
class NetLayout:
    """Which values of a plan are channels-last (``values``: node ids of torch convolutions run on a
    channels-last input, and of kernel outputs stored channels-last); ``convs``: those convolutions;
    ``direct``: the convolutions whose input is such a value already (no transpose); ``walks``: the
    pointwise groups that walk channels-last."""

    values: frozenset[int]
    convs: frozenset[int]
    direct: frozenset[int]
    walks: frozenset[int]


def _cl_outputs(g: Group) -> list[Node]:
    """The outputs of ``g`` that can be stored channels-last: full-rank 4-D/5-D values, not views."""
    if g.kind not in _CL_KINDS:
        return []
    return [o for o in g.outputs if len(o.shape) in (4, 5) and o.kind != VIEW and g.rank.get(o.id) == FULL]


def _walks(g: Group, values: set[int]) -> bool:
    """A pointwise group whose outputs are all channels-last and which can walk in that order:
    same-shaped elementwise ops, no concatenation or index ramps (those index in row-major order)."""
    if g.kind != POINTWISE or not g.outputs or not all(o.id in values for o in g.outputs):
        return False
    shape = g.outputs[0].shape
    return all(n.kind == PW and n.op not in ("cat", "iota") and n.shape == shape for n in g.nodes)


def _reads(plan: Plan) -> list[tuple[Node, Node | None, int]]:
    """Every read of a value from outside its group: (the argument as read, the reading node or None for
    a model output, the argument's position)."""
    reads: list[tuple[Node, Node | None, int]] = []
    for g in plan.groups:
        for n in g.nodes:
            reads += [(a, n, i) for i, a in enumerate(n.args) if isinstance(a, Node) and not g.has(a)]
    return reads + [(o, None, 0) for o in plan.graph.outputs]


def _view_ok(a: Node, base: Node) -> bool:
    """Can ``a`` (``base`` or views of it) be taken from a channels-last ``base`` without a copy?"""
    chain: list[Node] = []
    while a is not base:
        chain.append(a)
        a = a.args[0]
    t = torch.empty_strided(base.shape, channels_last_strides(base.shape), device="meta")
    try:
        for v in reversed(chain):
            t = apply_view(t, v)
    except RuntimeError:
        return False
    return True


def _illegal(plan: Plan, values: set[int]) -> Node | None:
    """A channels-last value with a reader that cannot take it, or None when the layout is consistent.
    Torch calls take one only as a channels-last convolution's input; kernels read through strides,
    so only a view that would need a copy (or a view inside a kernel) is refused."""
    for a, reader, pos in _reads(plan):
        src = resolve_base(a, plan.owner)
        if src.id not in values:
            continue
        group = plan.owner.get(reader.id) if reader is not None else None
        if group is not None and group.kind == TORCH:
            if not (reader.id in values and pos == 0 and a is src):
                return src
        elif (reader is not None and reader.kind == VIEW) or not _view_ok(a, src):
            return src
    return None


def plan_network(plan: Plan) -> NetLayout | None:
    """The channels-last layout of ``plan``'s values (see the module's docstring), or None when no dense
    convolution can use it. Grows from the convolutions through the kernels that read them, then keeps
    contiguous every value some reader needs contiguous, until the layout is consistent."""
    convs = {g.nodes[0].id for g in plan.groups if g.kind == TORCH and _cl_conv(g.nodes[0])}
    values = set(convs)
    grown = True
    while grown:
        grown = False
        for g in plan.groups:
            outs = [o for o in _cl_outputs(g) if o.id not in values]
            if outs and any(a.id in values for n in g.nodes for a in n.node_args() if not g.has(a)):
                values.update(o.id for o in outs)
                grown = True
    nodes = _nodes(plan)
    while True:
        bad = _illegal(plan, values)
        if bad is None:
            bad = next((nodes[c] for c in convs & values if not _input_ok(plan, nodes[c], values)), None)
        if bad is None:
            break
        values.discard(bad.id)
    convs &= values
    if not convs:
        return None
    direct = frozenset(c for c in convs if nodes[c].args[0].id in values)
    walks = frozenset(g.index for g in plan.groups if _walks(g, values))
    return NetLayout(frozenset(values), frozenset(convs), direct, walks)


def _nodes(plan: Plan) -> dict[int, Node]:
    """The plan's grouped nodes by id."""
    return {n.id: n for g in plan.groups for n in g.nodes}


def _input_ok(plan: Plan, conv: Node, values: set[int]) -> bool:
    """A channels-last convolution's input is a channels-last value itself, or contiguous (transposed)."""
    x = conv.args[0]
    return x.id in values or layout(x, plan.owner)[1] == contiguous_strides(x.shape)


def apply_network(plan: Plan, net: NetLayout) -> None:
    """Give ``plan`` the layout ``net``: channels-last strides on those values (kernels store them at
    channels-last addresses), a transpose before each convolution whose input is contiguous, and the
    pointwise groups that walk channels-last (``plan.cl_groups``)."""
    nodes = _nodes(plan)
    for v in net.values:
        n = nodes[v]
        n.strides, n.attrs["channels_last"] = channels_last_strides(n.shape), True
        if v in net.convs and v not in net.direct:
            n.attrs["cl_input"] = True  # the forward makes one channels-last copy of the input (_emit)
    plan.cl_groups = set(net.walks)
