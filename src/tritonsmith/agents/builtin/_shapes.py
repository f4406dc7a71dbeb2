"""Which sizes may change at run time: the leading (batch-like) dimension of the inputs.

KernelBench fixes every shape, but a kernel dropped into a model sees other batch sizes. The driver traces
the reference twice: at its own leading size and at another, odd one (``other_lead``), with the inputs
resized as the evaluator's ``generalize`` check resizes them (every tensor input whose first dimension is
the first input's). ``generic_lead`` compares the two graphs: where they have the same nodes and every
value either keeps its shape or changes only its first dimension in proportion to the leading size (with
the same strides and offset), the kernels take the leading size as a run-time argument (``_ir.Lead``).
The reference decides what scales: a model that bakes its batch size in (``x.view(batch_size, -1)``)
traces differently, or not at all, at the other size, and keeps shape-specialised kernels.

A reduction over the leading dimension (batch statistics, a loss) is generic too: its rows are as long as
the batch at run time, and the scalars that count them (a mean's ``sum / N``) are recorded in
``Lead.scalars`` and written as ``lead * k``. A view may move the leading size off the first dimension
(``Lead.axis``: ``A.T``, split-K's ``[S, M, K / S]``, an einsum's ``[1, b * i * j, l]``); matmuls then take
it as their M, N, batch or contracted K (``mm_roles``), and split-K's sum over its chunks as its row count.
Kept specialised (``NotGeneric``, with the reason in the candidate's note and the module's header): a leading
size of 1, any other value of fixed size computed from a batch-sized one (a contraction over the batch
other than a matmul's K loop), a moved leading size reaching any op but an elementwise one that keeps it in the
same dimension, a view, a torch call, a matmul, split-K's sum or a reduction whose rows run along it (a
whole-tensor sum's ``[1024, N * c]`` stage), a scan, concatenation or pooling window along
the leading dimension, an ``iota`` along it, a scalar that changes otherwise (an unbiased variance's ``N - 1``).
"""

from __future__ import annotations

__all__ = ["NotGeneric", "generic_lead", "mm_roles", "other_lead"]

from typing import Any

from tritonsmith.agents.builtin._ir import (EXTERN, MM, PW, REDUCE, SCAN, VIEW, WINDOW, Graph, Lead, Node, NotGeneric,
                                            contiguous_strides)

def other_lead(ref: int) -> int:
    """The second leading size traced: odd (so a size that must be even shows) and not ``ref``."""
    return ref + 1 if ref % 2 == 0 else ref + 2


def generic_lead(ref_graph: Graph, other_graph: Graph, ref: int, other: int) -> Lead:
    """Which values of ``ref_graph`` (traced at leading size ``ref``) scale with the leading size, from
    ``other_graph`` (the same reference traced at ``other``); raises :class:`NotGeneric` naming the first
    value that does not follow the rules of the module docstring."""
    if ref < 2:
        raise NotGeneric(f"the leading size is {ref}: a dimension of size 1 is indexed as a broadcast one")
    if len(ref_graph.nodes) != len(other_graph.nodes) or \
            [n.id for n in ref_graph.outputs] != [n.id for n in other_graph.outputs]:
        raise NotGeneric(f"the reference's graph changes with the leading size ({len(ref_graph.nodes)} values at "
                         f"{ref}, {len(other_graph.nodes)} at {other})")
    scale: dict[int, int] = {}
    axis: dict[int, int] = {}
    scalars: dict[tuple[int, int], tuple[float, int]] = {}
    for a, b in zip(ref_graph.nodes, other_graph.nodes, strict=True):
        why = _differs(a, b) or _scalar_args(a, b, ref, other, scalars)
        if why:
            raise NotGeneric(f"{_what(a)} changes with the leading size ({why})")
        if a.shape == b.shape:
            continue
        d = _following_dim(a.shape, b.shape, ref, other)
        if d is None:
            raise NotGeneric(f"{_what(a)} has shape {list(a.shape)} at leading size {ref} and {list(b.shape)} at "
                             f"{other}: only one dimension may follow the leading size, in proportion")
        scale[a.id] = a.shape[d] // ref
        if d:
            axis[a.id] = d
    lead = Lead(ref, scale, scalars, axis)
    for n in ref_graph.nodes:
        _check(n, lead)
    if not scale:
        raise NotGeneric("no value of the reference follows the leading size")
    return lead


def _following_dim(a: tuple[int, ...], b: tuple[int, ...], ref: int, other: int) -> int | None:
    """The one dimension in which shape ``a`` (at leading size ``ref``) and ``b`` (at ``other``) differ, in
    proportion to the leading size; None where they differ otherwise."""
    diff = [d for d, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if len(diff) != 1 or a[diff[0]] % ref or a[diff[0]] // ref * other != b[diff[0]]:
        return None
    return diff[0]


def _strides_seen(n: Node) -> tuple[int, ...] | None:
    """``n``'s strides where an index can be nonzero: a dimension of size 1 is always indexed 0, so its
    stride (a reshape's ``[1, b * i * j, l]`` gets the whole tensor's size) is read by no kernel."""
    if n.strides is None:
        return None
    return tuple(st for st, size in zip(n.strides, n.shape, strict=True) if size != 1)


def _what(n: Node) -> str:
    return f"{n.name or n.op or n.kind} (value %{n.id})"


def _differs(a: Node, b: Node) -> str:
    """Why ``a`` and ``b`` are not the same value at two leading sizes ("" when they are)."""
    if (a.kind, a.op, a.dims, a.dtype, a.name) != (b.kind, b.op, b.dims, b.dtype, b.name):
        return f"{a.kind} {a.op} becomes {b.kind} {b.op}"
    if len(a.shape) != len(b.shape):
        return f"rank {len(a.shape)} becomes {len(b.shape)}"
    if (_strides_seen(a), a.offset) != (_strides_seen(b), b.offset) and not _drawn(a, b):
        return f"strides {a.strides} (offset {a.offset}) become {b.strides} (offset {b.offset})"
    if len(a.args) != len(b.args) or any(isinstance(x, Node) != isinstance(y, Node) or (isinstance(x, Node) and
                                             not _same_arg(x, y)) for x, y in zip(a.args, b.args, strict=True)):
        return "its arguments differ"
    if not _same_attrs(_without_size(a), _without_size(b)):
        return f"attributes {a.attrs} become {b.attrs}"
    return ""


def _drawn(a: Node, b: Node) -> bool:
    """A random tensor drawn in forward (``torch.randn(size)``, an LSTM's ``[layers, batch, hidden]`` initial
    state): fresh and contiguous at any size, so where the leading size is a later dimension its strides
    change with it; the forward writes the size at run time (``_emit._drawn_size``)."""
    return a.kind == EXTERN and "size" in a.attrs and all(
        n.strides == contiguous_strides(n.shape) and not n.offset for n in (a, b))


def _without_size(n: Node) -> dict[str, Any]:
    """``n``'s attributes but a drawn tensor's size, which the shapes compare (in proportion or not at all)."""
    return {k: v for k, v in n.attrs.items() if not (k == "size" and n.kind == EXTERN)}


def _scalar_args(a: Node, b: Node, ref: int, other: int, scalars: dict[tuple[int, int], tuple[float, int]]) -> str:
    """Record ``a``'s scalar arguments that follow the leading size (``k * lead`` or ``k / lead``: a mean's
    count over the batch) in ``scalars``; why not ("" when every other scalar is the same)."""
    for pos, (x, y) in enumerate(zip(a.args, b.args, strict=True)):
        if isinstance(x, Node) or _same_arg(x, y):
            continue
        if a.kind != PW or not isinstance(x, (int, float)) or not isinstance(y, (int, float)) or \
                isinstance(x, bool) or not x or not y:
            return f"argument {pos}: {x!r} becomes {y!r}"
        if abs(x * other - y * ref) <= 1e-9 * abs(x * other):
            scalars[(a.id, pos)] = (x / ref, 1)
        elif abs(x * ref - y * other) <= 1e-9 * abs(x * ref):
            scalars[(a.id, pos)] = (x * ref, -1)
        else:
            return f"argument {pos}: {x!r} becomes {y!r}, not in proportion to the leading size"
    return ""


def _same_arg(x: Any, y: Any) -> bool:
    if isinstance(x, Node) or isinstance(y, Node):
        return isinstance(x, Node) and isinstance(y, Node) and x.id == y.id
    return type(x) is type(y) and x == y


def _same_attrs(x: dict[str, Any], y: dict[str, Any]) -> bool:
    try:
        return bool(x == y)
    except (RuntimeError, TypeError, ValueError):  # an attribute that does not compare (a tensor): not the same
        return False


def _check(n: Node, lead: Lead) -> None:
    """The op-level rules: what the kernels index with a fixed size must not follow the leading size."""
    if n.kind == MM:
        mm_roles(n, lead)
        return
    _check_axis(n, lead)
    if not lead.batched(n):
        src = next((a for a in n.node_args() if lead.batched(a)), None)
        if src is not None and not (n.kind == REDUCE and lead.dim(src) in n.dims):  # over the batch: fine
            raise NotGeneric(f"{_what(n)} has a fixed size but is computed from {_what(src)}, whose size follows "
                             "the leading size (a reduction, contraction or loss over the batch)")
        return
    if n.kind == SCAN and n.dims[0] == 0:
        raise NotGeneric(f"{_what(n)} scans along the leading dimension")
    if n.kind == PW and n.op in ("cat", "iota") and n.attrs.get("dim") == 0:
        raise NotGeneric(f"{_what(n)} ({n.op}) runs along the leading dimension")
    if n.kind == WINDOW and n.op != "dwconv" and \
            (n.attrs["kernel"][0], n.attrs["stride"][0], n.attrs["padding"][0], n.attrs["dilation"][0]) != (1, 1, 0, 1):
        raise NotGeneric(f"{_what(n)} pools along the leading dimension")


def _check_axis(n: Node, lead: Lead) -> None:
    """A leading size moved off the first dimension (by a view, or a torch call's output) reaches only views,
    torch calls, matmuls (``mm_roles``) and reductions whose every dimension before it is reduced (split-K's
    sum over its chunks): the other families index the first dimension only."""
    moved = [a for a in (n, *n.node_args()) if lead.batched(a) and lead.dim(a)]
    # a torch call takes its operands' sizes as they come (its text is the same at both sizes, ``_differs``)
    if not moved or n.kind in (VIEW, EXTERN) or _elementwise_along(n, lead):
        return
    d = lead.dim(moved[0])
    src = n.args[0] if n.kind == REDUCE else None
    if src is not None and lead.batched(src) and set(range(lead.dim(src))) <= set(n.dims) and \
            (not lead.batched(n) or lead.dim(n) == lead.dim(src)):
        return
    if src is not None and lead.batched(src) and lead.dim(src) in n.dims and not lead.batched(n):
        return  # rows as long as the batch (a whole-tensor sum's [1024, N * c] stage): their loop runs to it
    what = "its" if moved[0] is n else f"{_what(moved[0])}'s"
    raise NotGeneric(f"{_what(n)}: {what} dimension {d} follows the leading size, and only matmuls, split-K's "
                     "sum and elementwise ops that keep it there index it there")


def _elementwise_along(n: Node, lead: Lead) -> bool:
    """An elementwise op whose output follows the leading size in one dimension, and every batched argument
    (broadcast to the output's rank) in that same one: its kernel walks the output in row-major order and
    indexes each argument with the run-time size there (``KernelWriter._moved_offset``)."""
    if n.kind != PW or n.op in ("cat", "iota") or not lead.batched(n):
        return False
    d = lead.dim(n)
    return all(lead.dim_in(a, len(n.shape)) == d for a in n.node_args() if lead.batched(a))


def mm_roles(mm: Node, lead: Lead) -> str:
    """Which size of matmul ``mm`` (``A[.., M, K] @ B[.., K, N]``) follows the leading size: "" (none),
    "batch", "m", "n" or "k" (a contraction over the leading dimension: ``A.T @ B`` with A and B batched,
    the K loop's bound is run-time); raises :class:`NotGeneric` for any other combination."""
    a, b = mm.args
    da = lead.dim(a) - len(a.shape) if lead.batched(a) else None  # negative: counted from the last
    db = lead.dim(b) - len(b.shape) if lead.batched(b) else None
    do = lead.dim(mm) - len(mm.shape) if lead.batched(mm) else None
    roles = {(None, None, None): "", (-2, None, -2): "m", (None, -1, -1): "n", (-1, -2, None): "k"}
    if len(mm.shape) == 3:
        roles.update({(-3, -3, -3): "batch", (-3, None, -3): "batch", (None, -3, -3): "batch"})
    role = roles.get((da, db, do))
    if role is None:
        raise NotGeneric(f"{_what(mm)} follows the leading size in a way its kernel does not index (dimension "
                         f"{da} of A, {db} of B, {do} of the product, counted from the last)")
    return role
