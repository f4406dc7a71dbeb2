"""Fusion groups: consecutive pointwise ops, reductions sharing one set of rows, a matmul or a pooling
window or a convolution with the pointwise chain after it (its epilogue), a scan with the pointwise ops before and after
it along the same rows, and torch calls kept as they are (the hybrid policy).

Constant fills belong to no group: every reader inlines the value. A concatenation starts a pointwise group
of its own, so each of its sources is an external tensor (an input, a view, a stored value of an earlier
group) or a fill, read by index range; the ops after it fuse into its group as after any pointwise op."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tritonsmith.agents.builtin._ir import (
    CONV, EXTERN, INPUT, MM, PARAM, PW, REDUCE, SCAN, VIEW, WINDOW, Graph, Lead, Node, UnsupportedError,
    contiguous_strides, is_elementwise, is_fill, numel,
)

__all__ = ["PRO", "Group", "Plan", "RowDomain", "apply_view", "layout", "layout_at", "partition", "resolve_base"]

POINTWISE, ROW, MATMUL, TORCH = "pointwise", "row", "matmul", "torch"
WINDOWS, SCANS = "window", "scan"  # group kinds of pooling windows and of scans
CONVS = "conv"  # group kind of an implicit-GEMM convolution (its elementwise chain as epilogue)
FULL, KEPT = "full", "kept"
PRO = "pro"  # rank of a window group's prologue: the elementwise chain computing the window's input, per tap


@dataclass(frozen=True)
class RowDomain:
    """Rows of a reduction: ``shape`` with ``dims`` reduced. ``k`` indexes kept elements and ``r`` the
    reduced ones; the element's row-major index is ``sum(k-part) + sum(r-part)`` over at most two runs
    of adjacent dimensions each (``kept_runs``/``red_runs``: (size, row-major stride), outer first)."""

    shape: tuple[int, ...]
    dims: tuple[int, ...]
    kept_runs: tuple[tuple[int, int], ...]
    red_runs: tuple[tuple[int, int], ...]

    @property
    def numel(self) -> int:
        return numel(self.shape)

    @property
    def k(self) -> int:
        return numel(tuple(s for s, _ in self.kept_runs))

    @property
    def r(self) -> int:
        return numel(tuple(s for s, _ in self.red_runs))

    @property
    def kept_shape(self) -> tuple[int, ...]:
        return tuple(1 if i in self.dims else s for i, s in enumerate(self.shape))

    @property
    def key(self) -> tuple[object, ...]:
        return (self.numel, self.kept_runs, self.red_runs)

    @property
    def reduce_contiguous(self) -> bool:
        return bool(self.red_runs) and self.red_runs[-1][1] == 1


def row_domain(shape: tuple[int, ...], dims: tuple[int, ...]) -> RowDomain:
    strides = contiguous_strides(shape)
    kept: list[list[int]] = []
    red: list[list[int]] = []
    prev = None
    for i, (s, st) in enumerate(zip(shape, strides, strict=True)):
        if s == 1:
            continue
        is_red = i in dims
        runs = red if is_red else kept
        if prev == is_red and runs:
            runs[-1] = [runs[-1][0] * s, st]
        else:
            runs.append([s, st])
        prev = is_red
    if len(kept) > 2 or len(red) > 2:
        raise UnsupportedError(f"a reduction over dims {dims} of {list(shape)} interleaves too many dimensions")
    return RowDomain(shape, dims, tuple(map(tuple, kept)), tuple(map(tuple, red)))  # type: ignore[arg-type]


@dataclass(eq=False)
class Group:
    kind: str
    nodes: list[Node] = field(default_factory=list)
    numel: int = 0
    domain: RowDomain | None = None
    rank: dict[int, str] = field(default_factory=dict)
    outputs: list[Node] = field(default_factory=list)
    index: int = 0

    @property
    def mm(self) -> Node | None:
        return self.nodes[0] if self.kind == MATMUL else None

    @property
    def prologue(self) -> list[Node]:
        """A window group's prologue (rank ``PRO``): the elementwise chain whose last value is the window's
        input, in order; empty for every other group."""
        return [n for n in self.nodes if self.rank[n.id] == PRO]

    def has(self, node: Node) -> bool:
        return node.id in self.rank


@dataclass
class Plan:
    graph: Graph
    groups: list[Group]
    owner: dict[int, Group]
    torch_ops: list[str]
    # the leading size as a run-time value (shape-generic kernels), or None: kernels for the reference's shapes
    lead: Lead | None = None
    static_reason: str = ""  # why the kernels are shape-specialised (empty when ``lead`` is set or asked for)
    # net-cl (``_convcl.apply_network``): the pointwise groups that walk and store channels-last (None: no net-cl)
    cl_groups: set[int] | None = None

    def group_of(self, node: Node) -> Group | None:
        return self.owner.get(node.id)


def live_nodes(graph: Graph) -> list[Node]:
    live: set[int] = set()
    stack = list(graph.outputs)
    while stack:
        n = stack.pop()
        if n.id in live:
            continue
        live.add(n.id)
        stack.extend(n.node_args())
    return [n for n in graph.nodes if n.id in live]


class _Partitioner:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.groups: list[Group] = []
        self.owner: dict[int, Group] = {}
        self.front = 0

    def run(self) -> Plan:
        live = live_nodes(self.graph)
        self.users: dict[int, set[int]] = {}
        for n in live:
            for a in n.node_args():
                self.users.setdefault(a.id, set()).add(n.id)
        self.returned = {o.id for o in self.graph.outputs}
        for n in live:
            if n.kind in (INPUT, PARAM) or is_fill(n):
                continue
            self._place(n)
        for i, g in enumerate(self.groups):
            g.index = i
        self._mark_outputs()
        calls = {g.nodes[0].attrs.get("call_id", g.index): g.nodes[0] for g in self.groups if g.kind == TORCH}
        torch_ops = [n.attrs.get("op", "torch") for n in calls.values()]  # one torch call, several outputs: once
        return Plan(self.graph, self.groups, self.owner, torch_ops)

    # -- placement ---------------------------------------------------------------------------------
    def _place(self, n: Node) -> None:
        latest = self._latest_owner(n)
        if n.kind == VIEW:
            src = n.args[0]
            if latest is not None and latest.has(src) and n.attrs["how"] == "reshape" and latest.kind != TORCH:
                self._join(latest, n, latest.rank[src.id])
            return  # otherwise an external view of an addressable or materialized tensor
        if n.kind == EXTERN:
            self._new(TORCH, n, n.numel)
            return
        if n.kind == MM:
            self._new(MATMUL, n, n.numel, rank=FULL)
            return
        if n.kind == CONV:  # reads windows of its input across channels: the input must be in memory
            self._new(CONVS, n, n.numel, rank=FULL)
            return
        if n.kind == WINDOW:  # reads a window around each output: its input is in memory or computed per tap
            if not self._window_prologue(n, latest):
                self._new(WINDOWS, n, n.numel, rank=FULL)
            return
        if n.kind == SCAN:
            self._place_scan(n, latest)
            return
        if n.kind == REDUCE:
            self._place_reduce(n, latest)
            return
        if n.kind == PW and n.op == "cat":  # never fused with a source: those are read as external tensors
            self._new(POINTWISE, n, n.numel, rank=FULL)
            return
        for g in self._candidates(latest):
            if n.attrs.get("per_tap") and not (g.kind == POINTWISE and all(m.attrs.get("per_tap") for m in g.nodes)):
                continue  # a pooling's own copy of a chain (``_rewrite.recompute_for_window``): its group, its prologue
            rank = self._pw_rank(g, n)
            if rank is not None:
                self._join(g, n, rank)
                return
        self._new(POINTWISE, n, n.numel, rank=FULL, front=latest is None)

    def _candidates(self, latest: Group | None) -> list[Group]:
        """Groups a pointwise node may join: the one holding its latest input, or the newest group when
        every input is already stored (a chain after a torch call continues in that group)."""
        out = [latest] if latest is not None and latest.kind != TORCH else []
        # a chain of stored values does not join a scan group: it may be the prologue of a later scan
        if self.groups and self.groups[-1].kind not in (TORCH, SCANS) and self.groups[-1] not in out:
            if latest is None or self.groups.index(self.groups[-1]) > self.groups.index(latest):
                out.append(self.groups[-1])
        return out

    def _window_prologue(self, n: Node, latest: Group | None) -> bool:
        """A pooling window takes over the pointwise group computing its input when nothing else reads that
        chain's values: the chain becomes its prologue (rank ``PRO``), computed at every tap from the chain's
        own inputs, so its full-size output is never written and read back. Windows of kernel = stride read
        each input once; overlapping ones recompute the chain where windows overlap (elementwise: cheap)."""
        x = n.args[0]
        if n.op not in ("max", "avg") or latest is None or latest.kind != POINTWISE or not latest.has(x):
            return False
        chain = set(latest.rank)
        for m in latest.nodes:
            # elementwise ops and reshapes of x's elements: the taps' row-major index of x is theirs too
            if not is_elementwise(m) or m.numel != x.numel or latest.rank[m.id] != FULL:
                return False
            if m.id in self.returned or not self.users.get(m.id, set()) <= chain | {n.id}:
                return False
        g = Group(WINDOWS, numel=n.numel)
        self.groups[self.groups.index(latest)] = g  # in its place: the window reads only what the chain did
        self._join(g, n, FULL)
        for m in latest.nodes:
            self._join(g, m, PRO)
        return True

    def _place_reduce(self, n: Node, latest: Group | None) -> None:
        x = n.args[0]
        dom = row_domain(x.shape, n.dims)
        if latest is not None and latest.has(x):
            if latest.kind == POINTWISE and latest.numel == x.numel:
                latest.kind, latest.domain = ROW, dom
                self._join(latest, n, KEPT)
                return
            if latest.kind == ROW and latest.domain is not None and latest.domain.key == dom.key \
                    and latest.rank[x.id] == FULL:
                self._join(latest, n, KEPT)
                return
        g = self._new(ROW, n, dom.numel, rank=KEPT)
        g.domain = dom

    def _place_scan(self, n: Node, latest: Group | None) -> None:
        """A scan takes over the pointwise group computing its input (that chain becomes its prologue);
        otherwise it starts a group of its own. One scan per group: a second one reads the first's output."""
        x = n.args[0]
        dom = row_domain(x.shape, n.dims)
        if latest is not None and latest.has(x) and latest.kind == POINTWISE and latest.numel == x.numel:
            latest.kind, latest.domain = SCANS, dom
            self._join(latest, n, FULL)
            return
        g = self._new(SCANS, n, dom.numel, rank=FULL)
        g.domain = dom

    def _pw_rank(self, g: Group, n: Node) -> str | None:
        if g.kind == TORCH:
            return None
        if any(not g.has(a) and g.has(resolve_base(a, self.owner)) for a in n.node_args()):
            return None  # reads a permuted/sliced view of g's own value: only after g has stored it
        internal = [a for a in n.node_args() if g.has(a)]
        if g.kind in (POINTWISE, MATMUL, WINDOWS, SCANS, CONVS):
            return FULL if n.numel == g.numel else None
        dom = g.domain
        assert dom is not None
        if n.numel == dom.numel:
            for a in internal:
                if g.rank[a.id] == KEPT and (n.shape != dom.shape or a.shape != dom.kept_shape):
                    return None
            return FULL
        if n.numel == dom.k and all(g.rank[a.id] == KEPT for a in internal):
            return KEPT
        return None

    def _latest_owner(self, n: Node) -> Group | None:
        owners = [self.owner[a.id] for a in self._deps(n) if a.id in self.owner]
        return max(owners, key=self.groups.index) if owners else None

    def _deps(self, n: Node) -> list[Node]:
        """Node arguments, looking through external views to the value they read."""
        out = []
        for a in n.node_args():
            while a.kind == VIEW and a.id not in self.owner:
                a = a.args[0]
            out.append(a)
        return out

    def _join(self, g: Group, n: Node, rank: str) -> None:
        g.nodes.append(n)
        g.rank[n.id] = rank
        self.owner[n.id] = g

    def _new(self, kind: str, n: Node, size: int, rank: str = FULL, front: bool = False) -> Group:
        g = Group(kind, numel=size)
        if front:
            self.groups.insert(self.front, g)
            self.front += 1
        else:
            self.groups.append(g)
        self._join(g, n, rank)
        return g

    # -- materialization ------------------------------------------------------------------------
    def _mark_outputs(self) -> None:
        outs: set[int] = set()
        for g in self.groups:
            for n in g.nodes:
                for a in n.node_args():
                    if not g.has(a):
                        base = resolve_base(a, self.owner)
                        if base.id in self.owner:
                            outs.add(base.id)
        for o in self.graph.outputs:
            base = resolve_base(o, self.owner)
            if base.id in self.owner:
                outs.add(base.id)
            elif base.kind in (INPUT, PARAM):
                raise UnsupportedError("the reference returns an input or parameter unchanged")
            elif is_fill(base):
                raise UnsupportedError("the reference returns a constant-filled tensor")
        for g in self.groups:
            g.outputs = [n for n in g.nodes if n.id in outs]
            if g.kind == TORCH:
                g.outputs = list(g.nodes)


def resolve_base(a: Node, owner: dict[int, Group]) -> Node:
    while a.kind == VIEW and a.id not in owner:
        a = a.args[0]
    return a


def layout(a: Node, owner: dict[int, Group]) -> tuple[Node, tuple[int, ...], int]:
    """(base tensor, strides, element offset) of an external value: an input, a parameter, a torch
    call's output, a group's stored output, or views of those."""
    if a.id in owner or a.kind in (INPUT, PARAM, EXTERN):
        if a.id in owner and owner[a.id].kind != TORCH:  # a kernel's output: contiguous unless net-cl chose
            return a, (a.strides if a.attrs.get("channels_last") else contiguous_strides(a.shape)), 0
        assert a.strides is not None
        return a, a.strides, a.offset
    if a.kind != VIEW:
        raise UnsupportedError(f"internal error: {a} has no layout")
    base, strides, offset = layout(a.args[0], owner)
    try:
        v = _replay(a, tuple(a.args[0].shape), (strides, offset), tuple(a.shape))
    except RuntimeError as exc:
        raise UnsupportedError(f"a view of a strided tensor that needs a copy ({exc})") from exc
    return base, tuple(v.stride()), int(v.storage_offset())


def _replay(a: Node, src_shape: tuple[int, ...], src_layout: tuple[tuple[int, ...], int],
            shape: tuple[int, ...]) -> torch.Tensor:
    """VIEW node ``a`` (of shape ``shape``) applied to a meta tensor of its source's shape and layout."""
    strides, offset = src_layout
    t = torch.empty_strided(src_shape, strides, device="meta").as_strided(src_shape, strides, offset)
    return apply_view(t, a, shape)


def shape_at(n: Node, lead: Lead, size: int) -> tuple[int, ...]:
    """``n``'s shape when the leading size is ``size``."""
    if not lead.batched(n):
        return tuple(n.shape)
    d = lead.dim(n)
    return tuple(lead.scale[n.id] * size if i == d else v for i, v in enumerate(n.shape))


def layout_at(a: Node, owner: dict[int, Group], lead: Lead, size: int) -> tuple[tuple[int, ...], int] | None:
    """``layout(a)``'s strides and offset when the leading size is ``size``, the views replayed on the base's
    shape at that size; None where they cannot be known (a channels-last batched output, a view that would
    need a copy there). Kernels check with it that the strides they write hold at any leading size."""
    if a.id in owner or a.kind in (INPUT, PARAM, EXTERN):
        if a.id in owner and owner[a.id].kind != TORCH:
            if a.attrs.get("channels_last"):  # NHWC: the batch's stride is the only one that holds it
                return None if lead.batched(a) and lead.dim(a) else (tuple(a.strides), 0)
            return contiguous_strides(shape_at(a, lead, size)), 0
        assert a.strides is not None
        if lead.batched(a) and lead.dim(a) and (tuple(a.strides), a.offset) == (contiguous_strides(a.shape), 0):
            return contiguous_strides(shape_at(a, lead, size)), 0  # a drawn tensor (``_shapes._drawn``)
        return tuple(a.strides), a.offset  # ``_shapes`` found them the same at both traced sizes
    if a.kind != VIEW:
        return None
    src = a.args[0]
    inner = layout_at(src, owner, lead, size)
    if inner is None:
        return None
    try:
        v = _replay(a, shape_at(src, lead, size), inner, shape_at(a, lead, size))
    except RuntimeError:
        return None
    if tuple(v.shape) != shape_at(a, lead, size):  # a slice or select along the leading dimension
        return None
    return tuple(v.stride()), int(v.storage_offset())


def apply_view(t: torch.Tensor, a: Node, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """``t`` viewed as VIEW node ``a`` does (raises RuntimeError when that needs a copy); ``shape``: ``a``'s
    shape at another leading size."""
    how = a.attrs["how"]
    shape = tuple(a.shape) if shape is None else shape
    if how == "reshape":
        return t.view(shape)
    if how == "permute":
        return t.permute(a.attrs["perm"])
    if how == "select":
        return t.select(a.attrs["dim"], a.attrs["index"])
    if how == "slice":
        return t[(slice(None),) * a.attrs["dim"] + (slice(a.attrs["start"], a.attrs["end"], a.attrs["step"]),)]
    return t.expand(shape)


def partition(graph: Graph) -> Plan:
    plan = _Partitioner(graph).run()
    compute = [g for g in plan.groups if g.kind != TORCH]
    if not compute or all(all(n.kind == VIEW or n.attrs.get("bias_of") for n in g.nodes) for g in compute):
        ops = ", ".join(sorted(set(plan.torch_ops))) or "none"
        raise UnsupportedError(f"nothing to write in Triton: the reference is only torch calls ({ops}); "
                               "emitting them would be a torch wrapper")
    return plan
