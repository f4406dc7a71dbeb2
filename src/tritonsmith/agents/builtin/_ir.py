"""The small graph the built-in generator works on: tensors, pointwise ops, reductions, matmuls, pooling
windows, scans, convolutions, torch calls.

Every value has a static shape (KernelBench shapes are fixed; the emitted module checks them at run
time). Reductions always keep their dimensions; ``keepdim=False`` is a reduction followed by a view.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

SMS = 132  # streaming multiprocessors of an H100/H200: the kernels size their grids to fill them

# Node kinds
INPUT = "input"    # a forward argument
PARAM = "param"    # a parameter or buffer of the module (``self.<path>``)
PW = "pw"          # pointwise op; ``op`` names it, ``args`` are Nodes or Python scalars. Two read no
#                    elementwise args: ``full`` (no args, ``attrs['value']`` everywhere) and ``cat`` (args are
#                    the sources, concatenated along ``attrs['dim']``; each element picks its source)
REDUCE = "reduce"  # reduction over ``dims`` (kept as size 1); ``op`` in sum/max/min/argmax/argmin
VIEW = "view"      # reshape / permute / expand; ``attrs['how']`` says which
MM = "mm"          # batched matmul: args (A[B,M,K], B[B,K,N]) -> [B,M,N] (B may be absent: 2-D)
EXTERN = "extern"  # a torch call kept as is (``attrs['call']`` formats it)
WINDOW = "window"  # pooling, ``op`` in max/avg; attrs kernel/stride/padding/dilation: one entry per input dim;
#                    or depthwise conv, ``op`` dwconv, args (x, weight), those attrs per spatial dim, ``mult``
SCAN = "scan"      # inclusive scan along ``dims[0]`` (same shape as its input); ``op`` in sum/prod
CONV = "conv"      # dense / grouped / transposed convolution without bias, args (x, weight); attrs per spatial
#                    dim: kernel, stride, padding, dilation, output_padding; and groups, transposed

REDUCE_OPS = ("sum", "max", "min", "argmax", "argmin")


class UnsupportedError(Exception):
    """The reference uses something the built-in generator cannot write (the message says what)."""


class NotGeneric(UnsupportedError):
    """The kernels cannot take the leading size at run time (the message says why): they stay specialised."""


@dataclass(eq=False)
class Node:
    """One value of the graph."""

    kind: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    args: tuple[Any, ...] = ()
    op: str = ""
    dims: tuple[int, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    # Addressable tensors (inputs, parameters, torch-call outputs and views of them) know their layout.
    strides: tuple[int, ...] | None = None
    offset: int = 0
    id: int = -1

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def addressable(self) -> bool:
        return self.strides is not None

    def node_args(self) -> list[Node]:
        return [a for a in self.args if isinstance(a, Node)]

    def __repr__(self) -> str:
        return f"%{self.id}:{self.kind}.{self.op or self.name}{list(self.shape)}"


@dataclass
class Graph:
    """Nodes in topological order, the forward's tensor inputs and the outputs."""

    nodes: list[Node] = field(default_factory=list)
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, node: Node) -> Node:
        node.id = len(self.nodes)
        self.nodes.append(node)
        return node

    def users(self) -> dict[int, list[Node]]:
        out: dict[int, list[Node]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for a in n.node_args():
                out[a.id].append(n)
        return out


def is_elementwise(n: Node) -> bool:
    """An op that maps each element on its own index (not a concatenation or an index ramp), or a reshape: its
    value at a row-major index reads its inputs at that same index."""
    return (n.kind == PW and n.op not in ("cat", "iota")) or (n.kind == VIEW and n.attrs.get("how") == "reshape")


def is_fill(n: Node) -> bool:
    """A constant-filled tensor (``torch.full``/``zeros_like``/...): no memory read, inlined where it is used."""
    return n.kind == PW and n.op == "full"


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


class Lowering(Protocol):
    """What a lowering rule (``_lower.LOWERINGS``: ``rule(lw, fx_node, *args, **kwargs)``) sees of the tracer
    (``_trace._Lowering``, which implements it): the graph it adds to, the variant's graph options and the
    node builders. Each builder applies torch's shape rules and returns the new node (or its input, where
    the op changes nothing). A protocol, so that the rules never name the tracer that imports them."""

    g: Graph
    options: dict[str, Any]
    split_k_auto: list[int]  # the split-K counts the lowering chose itself, in order (``_lower.split_k_for``)

    def pw(self, op: str, *args: Any, dtype: torch.dtype | None = None, **attrs: Any) -> Node: ...

    def reduce(self, op: str, x: Node, dims: list[int] | tuple[int, ...] | None, keepdim: bool) -> Node: ...

    def view(self, x: Node, shape: tuple[int, ...]) -> Node: ...

    def permute(self, x: Node, dims: list[int]) -> Node: ...

    def expand(self, x: Node, shape: tuple[int, ...]) -> Node: ...

    def mm(self, a: Node, b: Node) -> Node: ...

    def extern(self, call: str, args: tuple[Any, ...], val: Any, **attrs: Any) -> Node: ...

    # select / slice: a view whose strides come from applying ``fn`` to a meta tensor of ``x``'s layout
    def _view_like(self, x: Node, shape: tuple[int, ...], how: str, fn: Callable[[Any], Any],
                   **attrs: Any) -> Node: ...


@dataclass(frozen=True)
class Lead:
    """The leading (batch-like) size as a run-time value of the kernels (``_shapes.generic_lead``).

    ``ref`` is the reference's leading size; ``scale[node id] = c`` for every value whose first dimension
    (or dimension ``axis[node id]``) is ``c * lead`` at any leading size ``lead`` (its other dimensions,
    strides and offset never change). Values not in ``scale`` have the same shape at every leading size.
    """

    ref: int
    scale: dict[int, int]
    # (node id, argument position) -> (k, p): a scalar argument worth ``k * lead ** p`` (p = 1 or -1): the
    # count of a mean or variance over the batch (``sum / N``, ``sum * (1 / N)``)
    scalars: dict[tuple[int, int], tuple[float, int]] = field(default_factory=dict)
    # node id -> the dimension that follows the leading size, where it is not the first: views that move it
    # (``A.T``, split-K's ``[S, M, K / S]``, einsum's ``[1, b * i * j, l]``) and what matmuls make of them
    axis: dict[int, int] = field(default_factory=dict)

    def batched(self, n: Node) -> bool:
        return n.id in self.scale

    def dim(self, n: Node) -> int:
        """The dimension of batched ``n`` that follows the leading size (0 unless a view moved it)."""
        return self.axis.get(n.id, 0)

    def dim_in(self, n: Node, rank: int) -> int:
        """``dim(n)`` once ``n`` is broadcast to ``rank`` dimensions (leading ones prepended)."""
        return self.dim(n) + rank - len(n.shape)

    def sized_input(self, inputs: Sequence[Node]) -> Node | None:
        """The first of ``inputs`` whose first dimension follows the leading size: its ``shape[0]`` gives the
        size at run time to a launcher or forward that reads nothing else batch-sized."""
        return next((i for i in inputs if self.batched(i) and not self.dim(i)), None)

    def scalar(self, node: Node, pos: int) -> str | None:
        """Kernel text of ``node``'s scalar argument ``pos`` where it follows the leading size, else None."""
        k, p = self.scalars.get((node.id, pos), (0.0, 0))
        if not p:
            return None
        return f"(lead * {k!r})" if p == 1 else f"({k!r} / lead)"

    def per_lead(self, value: int) -> int:
        """``value`` (a size at the reference's leading size that scales with it) divided by that size."""
        if value % self.ref:
            raise NotGeneric(f"size {value} does not scale with the leading size {self.ref}")
        return value // self.ref
