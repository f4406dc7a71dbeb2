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
``Lead.scalars`` and written as ``lead * k``. Kept specialised (``NotGeneric``, with the reason in the
candidate's note): a leading size of 1, any other value of fixed size computed from a batch-sized one (a
contraction over the batch), a scan, concatenation or pooling window along the leading dimension, an
``iota`` along it, a scalar that changes otherwise (an unbiased variance's ``N - 1``).
"""

from __future__ import annotations

__all__ = ["NotGeneric", "generic_lead", "other_lead"]

from typing import Any

from tritonsmith.agents.builtin._ir import MM, PW, REDUCE, SCAN, WINDOW, Graph, Lead, Node, NotGeneric

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
    scalars: dict[tuple[int, int], tuple[float, int]] = {}
    for a, b in zip(ref_graph.nodes, other_graph.nodes, strict=True):
        why = _differs(a, b) or _scalar_args(a, b, ref, other, scalars)
        if why:
            raise NotGeneric(f"{_what(a)} changes with the leading size ({why})")
        if a.shape == b.shape:
            continue
        if a.shape[1:] == b.shape[1:] and a.shape[0] % ref == 0 and a.shape[0] // ref * other == b.shape[0]:
            scale[a.id] = a.shape[0] // ref
        else:
            raise NotGeneric(f"{_what(a)} has shape {list(a.shape)} at leading size {ref} and {list(b.shape)} at "
                             f"{other}: only the first dimension may follow the leading size")
    lead = Lead(ref, scale, scalars)
    for n in ref_graph.nodes:
        _check(n, lead)
    if not scale:
        raise NotGeneric("no value of the reference follows the leading size")
    return lead


def _what(n: Node) -> str:
    return f"{n.name or n.op or n.kind} (value %{n.id})"


def _differs(a: Node, b: Node) -> str:
    """Why ``a`` and ``b`` are not the same value at two leading sizes ("" when they are)."""
    if (a.kind, a.op, a.dims, a.dtype, a.name) != (b.kind, b.op, b.dims, b.dtype, b.name):
        return f"{a.kind} {a.op} becomes {b.kind} {b.op}"
    if len(a.shape) != len(b.shape):
        return f"rank {len(a.shape)} becomes {len(b.shape)}"
    if (a.strides, a.offset) != (b.strides, b.offset):
        return f"strides {a.strides} (offset {a.offset}) become {b.strides} (offset {b.offset})"
    if len(a.args) != len(b.args) or any(isinstance(x, Node) != isinstance(y, Node) or (isinstance(x, Node) and
                                             not _same_arg(x, y)) for x, y in zip(a.args, b.args, strict=True)):
        return "its arguments differ"
    if not _same_attrs(a.attrs, b.attrs):
        return f"attributes {a.attrs} become {b.attrs}"
    return ""


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
    if not lead.batched(n):
        src = next((a for a in n.node_args() if lead.batched(a)), None)
        if src is not None and not (n.kind == REDUCE and 0 in n.dims):  # a reduction over the batch is fine
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
    if n.kind == MM and len(n.shape) == 2 and lead.batched(n.args[1]):
        raise NotGeneric(f"{_what(n)} contracts over the leading dimension")
