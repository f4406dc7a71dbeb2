"""What every kernel writer shares: the kernel's source record, the per-kernel writer state (pointers,
cached loads, elementwise lines, stores, signature, docstring and launcher), and the index helpers two
families use (row indexing: row and scan kernels; window dimensions: pooling and depthwise convolution).

The kernel families (``_pointwise``, ``_matmul``, ``_rowkernel``, ``_window``, ``_dwconv``, ``_scan``)
import this module and never each other; ``_kernels.kernel_for`` picks the family of a group.
"""

from __future__ import annotations

__all__ = ["IDX64_AT", "KernelSource", "KernelWriter", "WindowDim", "channel_fastest_lines", "describe", "describe_external",
           "fill_expr", "next_pow2", "row_digits", "row_index_lines", "tuple_text"]

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

from tritonsmith.agents.builtin._convcl import CL_FORMAT, channels_last_strides
from tritonsmith.agents.builtin._exprs import (TL_DTYPE, Digits, broadcast_strides, literal, offset_expr, offset_text,
                                              pw_expr)
from tritonsmith.agents.builtin._ir import (REDUCE, VIEW, Lead, Node, NotGeneric, UnsupportedError, contiguous_strides,
                                           is_fill, numel)
from tritonsmith.agents.builtin._partition import (FULL, KEPT, PRO, ROW, Group, Plan, RowDomain, layout, layout_at,
                                                  resolve_base)

IDX64_AT = (1 << 31) - (1 << 24)


@dataclass
class KernelSource:
    """One group's kernel text and launcher text (``name(a0, a1, ...)`` returns the outputs), and the helper
    sources (``_exprs.HELPERS`` keys) they call."""

    name: str
    kernel: str
    launcher: str
    bases: list[Node]       # tensors the launcher takes, in order
    outputs: list[Node]     # tensors it returns, in order
    helpers: set[str] = field(default_factory=set)


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


class KernelWriter:
    """Shared state of one kernel: pointer names, cached loads and emitted lines."""

    def __init__(self, plan: Plan, group: Group, name: str) -> None:
        self.plan, self.g, self.name = plan, group, name
        self.bases: list[Node] = []
        self.ptr: dict[int, str] = {}
        self.helpers: set[str] = set()
        self.idx64 = False
        # walk order of a FULL-rank index, slowest dim first (conv-cl: channels-last memory order)
        self.order: tuple[int, ...] | None = None
        self.out_format = ""  # "" (contiguous) or a torch memory format the outputs are allocated in
        self.digits: Digits | None = None  # a row kernel's ``lin`` as its runs' coordinates (``_exprs.Digits``)
        # shape-generic: the kernel takes the leading size ``lead`` at run time (None: the reference's shapes)
        self.lead: Lead | None = plan.lead if plan.lead is not None and any(
            plan.lead.batched(a) for n in group.nodes for a in (n, *n.node_args())) else None
        # the row-major index (and its mask) full-rank values are read at: the group's own ``lin``, or a window
        # prologue's tap (``_window``: the elementwise chain before a pooling window, computed per tap)
        self.full_index: tuple[str, str] = ("lin", "mask")
        self.prep: list[str] = []  # launcher lines run after the inputs are checked (a channels-last copy)

    def size(self, value: int, scaled: bool = True) -> str:
        """Size ``value`` (at the reference's shapes) as kernel or launcher text: the literal, or ``lead * c``
        where the kernel is shape-generic and ``scaled`` says the size follows the leading one."""
        if self.lead is None or not scaled:
            return str(value)
        c = self.lead.per_lead(value)
        return "lead" if c == 1 else f"lead * {c}"

    def shape_text(self, n: Node) -> str:
        """``n``'s shape as launcher text (its first dimension, or the one ``Lead.axis`` names, ``lead * c``
        where it follows the leading size)."""
        if self.lead is None or not self.lead.batched(n):
            return str(tuple(n.shape))
        d = self.lead.dim(n)
        return tuple_text([self.size(v) if i == d else str(v) for i, v in enumerate(n.shape)])

    def strides_text(self, n: Node) -> str:
        """The strides of base tensor ``n`` as launcher text: where a dimension after the first follows the
        leading size (split-K's partial products ``[S, lead, N]``), the strides of the dimensions before it
        hold that size too; they are written for a contiguous tensor only."""
        strides = tuple(layout(n, self.plan.owner)[1])
        d = self.lead.dim(n) if self.lead is not None and self.lead.batched(n) else 0
        if not d:
            return str(strides)
        if strides != contiguous_strides(n.shape):
            raise NotGeneric(f"{self.name} reads {describe_external(n)}, whose dimension {d} follows the leading "
                             f"size, through strides {strides}")
        return tuple_text([self.size(st) if i < d else str(st) for i, st in enumerate(strides)])

    def base_ptr(self, base: Node) -> str:
        if base.id not in self.ptr:
            self.bases.append(base)
            self.ptr[base.id] = f"in{len(self.bases) - 1}_ptr"
            self.check_size(base.numel)
        return self.ptr[base.id]

    def check_size(self, n: int) -> None:
        if n >= IDX64_AT:
            self.idx64 = True

    def value(self, a: Any, use: tuple[int, ...], rank: str, lines: list[str], cache: dict[Any, str],
              as_float: bool) -> str:
        """Expression for argument ``a`` of an op whose output has shape ``use`` and ``rank``."""
        if not isinstance(a, Node):
            return literal(a, as_float)
        if self.g.has(a):
            return f"v{a.id}"
        fill = resolve_base(a, self.plan.owner)
        if is_fill(fill):  # a constant: a block of its value, nothing to load
            return fill_expr(fill, self.full_index[0] if rank == FULL else "k")
        if rank == FULL and self._per_row(a, use):  # a row's own value (BatchNorm's weight): by row, not element
            return self.value(a, self.g.domain.kept_shape, KEPT, lines, cache, as_float)  # type: ignore[union-attr]
        idx, mask = self.full_index if rank == FULL else ("k", "kmask")
        key = (a.id, use, rank, idx)
        if key not in cache:
            base, strides, off = layout(a, self.plan.owner)
            ptr = self.base_ptr(base)
            bstrides = broadcast_strides(a.shape, strides, use)
            texts = self.lead_layout(a, use, bstrides, off)
            if self.order is not None and rank == FULL:
                use, bstrides = tuple(use[d] for d in self.order), tuple(bstrides[d] for d in self.order)
                texts = (tuple(texts[0][d] for d in self.order), texts[1])
            moved = self._moved_lead(use, a) if rank == FULL and self.order is None else None
            if moved:
                offs = self._moved_offset(a, use, texts, moved, idx)
            elif texts != (bstrides, off):  # a stride or the offset holds the leading size (attention's q, k, v)
                offs = offset_text(idx, use, *texts)
            else:
                offs = offset_expr(idx, use, bstrides, off, self._digits(idx, use))
            var = f"x{len(cache)}_{rank[0]}"
            load = f"tl.load({ptr} + {offs})" if offs.isdigit() else f"tl.load({ptr} + {offs}, mask={mask}, other=0)"
            cast = ".to(tl.float32)" if a.dtype.is_floating_point else ""
            lines.append(f"{var} = {load}{cast}  # {describe_external(a)}")
            cache[key] = var
        return cache[key]

    def _digits(self, idx: str, use: tuple[int, ...]) -> Digits | None:
        """The row kernel's digits where ``idx`` is its row-major index ``lin`` walked in ``use``'s own order."""
        dom = self.g.domain
        if self.digits is None or dom is None or idx != "lin" or self.order is not None or numel(use) != dom.numel:
            return None
        return self.digits

    def _moved_lead(self, use: tuple[int, ...], a: Node | None = None) -> int | None:
        """The dimension of ``use`` (the shape this group's elements walk) that follows the leading size when a
        view moved it off the first (``[1, C, N, 1]``, attention's ``[2, N, 32]``; split-K's partial products
        ``[S, N, K]``, read by the sum over them as argument ``a``); None otherwise."""
        lead = self.lead
        if lead is None:
            return None
        d = next((lead.dim(n) for n in self.g.nodes if n.shape == use and lead.batched(n)), 0)
        if not d and a is not None and lead.batched(a):
            d = lead.dim_in(a, len(use))
        return d or None

    def _moved_offset(self, a: Node, use: tuple[int, ...], texts: tuple[tuple[int | str, ...], int | str],
                      d: int, idx: str = "lin") -> str:
        """``a``'s offset for row-major index ``lin`` of ``use`` whose dimension ``d`` is ``lead * c`` at run time,
        through ``a``'s strides and offset as ``lead_layout`` writes them."""
        lead = self.lead
        assert lead is not None
        sizes: list[int | str] = [self.size(s) if i == d else s for i, s in enumerate(use)]
        if lead.batched(a) and lead.dim_in(a, len(use)) != d:
            raise NotGeneric(f"{self.name} reads {describe_external(a)}, whose dimension {lead.dim(a)} follows "
                             f"the leading size, as dimension {lead.dim_in(a, len(use))} of elements "
                             f"whose dimension {d} does")
        if texts == self._contiguous_texts(a, use, d):  # the row-major index itself, as a kernel's own output
            return idx
        return offset_text(idx, tuple(sizes), *texts)

    def _contiguous_texts(self, a: Node, use: tuple[int, ...], d: int) -> tuple[tuple[int | str, ...], int | str]:
        """The strides (as ``lead_layout`` writes them) of a contiguous tensor of ``use``, whose dimension ``d`` is
        ``lead * c``, and offset 0."""
        lead = self.lead
        assert lead is not None
        c = lead.per_lead(use[d])
        at = [(x, contiguous_strides(tuple(c * x if i == d else v for i, v in enumerate(use))))
              for x in (lead.ref, lead.ref + 1, 2 * lead.ref + 3)]
        return tuple(self._linear(a, [(x, st[i]) for x, st in at]) for i in range(len(use))), 0

    def lead_layout(self, a: Node, use: tuple[int, ...], bstrides: tuple[int, ...],
                     off: int) -> tuple[tuple[int | str, ...], int | str]:
        """``a``'s strides (broadcast to ``use``) and offset as kernel text: each is ``s0 + s1 * lead``, found from
        ``a``'s layout replayed at two more leading sizes (``layout_at``) and written as the literal where
        ``s1`` is 0. A layout that is unknown there, or not linear in the leading size, keeps the kernels
        shape-specialised (``NotGeneric``)."""
        lead = self.lead
        if lead is None:
            return bstrides, off
        samples: list[tuple[int, tuple[int, ...], int]] = [(lead.ref, bstrides, off)]
        for size in (lead.ref + 1, 2 * lead.ref + 3):
            got = layout_at(a, self.plan.owner, lead, size)
            if got is None:
                raise NotGeneric(f"{self.name} reads {describe_external(a)}, whose layout at leading size {size} "
                                 "cannot be derived")
            samples.append((size, broadcast_strides(a.shape, got[0], use), got[1]))
        strides = tuple(self._linear(a, [(s, b[i]) for s, b, _ in samples]) for i in range(len(use)))
        return strides, self._linear(a, [(s, o) for s, _, o in samples])

    def _linear(self, a: Node, points: list[tuple[int, int]]) -> int | str:
        """``s0 + s1 * lead`` through ``points`` (leading size, value) as text (the literal where constant)."""
        (x0, y0), (x1, y1), (x2, y2) = points
        s1, rem = divmod(y1 - y0, x1 - x0)
        s0 = y0 - s1 * x0
        if rem or s0 + s1 * x2 != y2:
            raise NotGeneric(f"{self.name} reads {describe_external(a)} through a stride or offset that does not "
                             f"follow the leading size linearly ({y0}, {y1}, {y2} at {x0}, {x1}, {x2})")
        if not s1:
            return s0
        term = "lead" if s1 == 1 else f"lead * {s1}"
        return term if not s0 else f"({s0} + {term})"

    def _per_row(self, a: Node, use: tuple[int, ...]) -> bool:
        """Whether external ``a``, read at the full rank ``use`` of a row kernel, is constant along every reduced
        dimension: then it is one value per row, loaded by the row index ``k`` (a ``[BLOCK_K, 1]`` tile) instead
        of by element from ``lin`` (a division, a modulo and a gathered load per element: BatchNorm's weight,
        bias and a convolution's bias in its statistics and apply loops)."""
        dom = self.g.domain
        if self.g.kind != ROW or dom is None or self.order is not None or tuple(use) != tuple(dom.shape):
            return False
        _, strides, _ = layout(a, self.plan.owner)
        bstrides = broadcast_strides(a.shape, strides, use)
        return all(bstrides[d] == 0 for d in dom.dims) and any(bstrides[d] for d in range(len(use)))

    def pointwise_line(self, n: Node, lines: list[str], cache: dict[Any, str]) -> None:
        rank = FULL if self.g.rank[n.id] == PRO else self.g.rank[n.id]
        if n.kind == VIEW:
            lines.append(f"v{n.id} = v{n.args[0].id}  # view as {list(n.shape)}: same elements, same order")
            return
        if n.op == "cat":
            self.cat_lines(n, lines, cache)
            return
        as_float = n.dtype.is_floating_point or n.op in ("where",)
        args = [self._scalar(n, i) or self.value(a, n.shape, rank, lines, cache, as_float)
                for i, a in enumerate(n.args)]
        idx = self.full_index[0] if rank == FULL else "k"
        lines.append(f"v{n.id} = {pw_expr(n, args, self.helpers, {'idx': idx})}  # {describe(n)}")

    def _scalar(self, n: Node, pos: int) -> str | None:
        """``n``'s scalar argument ``pos`` as run-time text where it follows the leading size (a mean's count)."""
        lead = self.plan.lead
        text = lead.scalar(n, pos) if lead is not None else None
        if text is not None and self.lead is None:
            self._lead_from_input()
        return text

    def _lead_from_input(self) -> None:
        """A kernel that reads no batch-sized value but divides by a count that follows the leading size (the
        second stage of a whole-tensor mean, over 1024 partial sums): the launcher takes a model input whose first
        dimension is the leading size too, only to read that size (the kernel never loads it)."""
        lead = self.plan.lead
        assert lead is not None
        x = lead.sized_input(self.plan.graph.inputs)
        if x is None:
            raise NotGeneric(f"{self.name} uses a count that follows the leading size but reads no batch-sized "
                             "value, and no input shows that size")
        self.lead = lead
        self.base_ptr(x)

    def cat_lines(self, n: Node, lines: list[str], cache: dict[Any, str]) -> None:
        """``v = cat(sources, dim)``: element ``i`` with index ``c`` along ``dim`` comes from the source whose
        range ``[lo, lo + size)`` holds ``c``, at the same index with ``c - lo`` along ``dim``. Each source is
        an external tensor (a masked load through its own strides) or a fill (its value)."""
        rank = self.g.rank[n.id]
        idx, mask = ("lin", "mask") if rank == FULL else ("k", "kmask")
        d = n.attrs["dim"]
        inner, size = numel(n.shape[d + 1:]), n.shape[d]
        c = f"c{n.id}"
        digits = self._digits(idx, n.shape)
        got = digits.of(inner, size) if digits is not None else None
        lines.append(f"{c} = {got[0] if got else (idx if inner == 1 else f'({idx} // {inner})') + f' % {size}'}"
                     f"  # index along cat dim {d}")
        sources = n.node_args()
        owner = self.plan.owner
        # one pointer per element, then one load: each element has exactly one source, and loading every
        # source's tile (masked) kept them all live (DenseNet201: 48 sources, 500-850 spilled registers on sm_90)
        by_pointer = len({a.dtype for a in sources}) == 1 and not any(is_fill(resolve_base(a, owner)) for a in sources)
        if by_pointer and got is not None and got[1] and self._cat_by_row(n, c, (inner, size), lines):
            return
        lo = 0
        for j, src in enumerate(sources):
            hi = lo + src.shape[d]
            sel = f"sel{n.id}_{j}"
            bounds = ([f"({c} >= {lo})"] if lo > 0 else []) + ([f"({c} < {hi})"] if hi < size else [])
            lines.append(f"{sel} = {' & '.join(bounds)}  # from source {j}: {describe_external(src)}")
            names, geo = (idx, mask, c, sel), (lo, inner, size)
            if by_pointer:
                ptr = self._cat_pointer(n, j, src, names, geo, lines, guard=False)
                lines.append(f"p{n.id} = {ptr if j == 0 else f'tl.where({sel}, {ptr}, p{n.id})'}")
            else:
                val = (self.value(src, src.shape, rank, lines, cache, n.dtype.is_floating_point)
                       if is_fill(resolve_base(src, owner)) else self._cat_load(n, j, src, names, geo, lines))
                lines.append(f"v{n.id} = {val if j == 0 else f'tl.where({sel}, {val}, v{n.id})'}")
            lo = hi
        if by_pointer:
            cast = ".to(tl.float32)" if n.dtype.is_floating_point else ""
            lines.append(f"v{n.id} = tl.load(p{n.id}, mask={mask}, other=0){cast}  # {describe(n)}")
        else:
            lines[-1] += f"  # {describe(n)}"

    def _cat_by_row(self, n: Node, c: str, geo: tuple[int, int], lines: list[str]) -> bool:
        """A concatenation along a dimension the rows own (a channel of BatchNorm's rows): each row has one
        source, so its pointer and batch stride are chosen once per row, and an element's address is one
        multiply-add of the digits the row kernel already has (a 6-source DenseNet block compared and selected
        six 64-bit pointers per element). False (nothing written) unless every source is contiguous."""
        sources, owner, digits = n.node_args(), self.plan.owner, self.digits
        inner, size = geo
        layouts = [layout(a, owner) for a in sources]
        if digits is None or any((tuple(st), off) != (contiguous_strides(a.shape), 0)
                                 for a, (_, st, off) in zip(sources, layouts, strict=True)):
            return False
        outer, low = digits.of(inner * size, None), digits.of(1, inner) if inner > 1 else ("0", True)
        if outer is None or low is None:
            return False
        d, lo = n.attrs["dim"], 0
        for j, (src, (base, _, _)) in enumerate(zip(sources, layouts, strict=True)):
            row = f"{self.base_ptr(base)} + ({c} - {lo}) * {inner}"
            width = src.shape[d] * inner  # the source's stride of the dimensions before the cat's
            if j == 0:
                lines += [f"q{n.id} = {row}  # the row's source: {describe_external(src)}", f"o{n.id} = {width}"]
            else:
                sel = f"({c} >= {lo})"
                lines += [f"q{n.id} = tl.where({sel}, {row}, q{n.id})  # {describe_external(src)}",
                          f"o{n.id} = tl.where({sel}, {width}, o{n.id})"]
            lo += src.shape[d]
        cast = ".to(tl.float32)" if n.dtype.is_floating_point else ""
        lines.append(f"v{n.id} = tl.load(q{n.id} + {outer[0]} * o{n.id} + {low[0]}, mask=mask, other=0){cast}"
                     f"  # {describe(n)}")
        return True

    def _cat_pointer(self, n: Node, j: int, src: Node, names: tuple[str, str, str, str],
                     geo: tuple[int, int, int], lines: list[str], *, guard: bool) -> str:
        """The address of each element in cat source ``j``: the element's coordinates in the concatenation (its
        row-major index ``idx`` of ``n.shape``) through the source's strides, ``lo`` back along the cat dim (one
        decomposition of ``idx``, not a second one of the source's own row-major index); with ``guard``, lanes of
        other sources get offset 0, so no address is out of range even masked."""
        idx, _, _, sel = names
        lo = geo[0]
        base, strides, off = layout(src, self.plan.owner)
        d = n.attrs["dim"]
        offs = offset_expr(idx, n.shape, strides, off - lo * strides[d], self._digits(idx, n.shape))
        if not guard:
            return f"{self.base_ptr(base)} + {offs}"
        local = f"i{n.id}_{j}"
        lines.append(f"{local} = tl.where({sel}, {offs}, 0)")
        return f"{self.base_ptr(base)} + {local}"

    def _cat_load(self, n: Node, j: int, src: Node, names: tuple[str, str, str, str],
                  geo: tuple[int, int, int], lines: list[str]) -> str:
        """Masked load of cat source ``j`` at the element's row-major index within that source."""
        ptr = self._cat_pointer(n, j, src, names, geo, lines, guard=True)
        cast = ".to(tl.float32)" if src.dtype.is_floating_point else ""
        var = f"x{n.id}_{j}"
        lines.append(f"{var} = tl.load({ptr}, mask={names[1]} & {names[3]}, other=0){cast}")
        return var

    def store(self, n: Node, rank: str, mask: str | None = None) -> str:
        idx, default = ("lin", "mask") if rank == FULL else ("k", "kmask")
        off = idx
        if rank == FULL and self.order is None and n.attrs.get("channels_last"):
            assert n.strides is not None  # net-cl: the row-major index goes to its channels-last address
            off = offset_expr(idx, n.shape, n.strides, 0, self._digits(idx, n.shape))
        return (f"tl.store(out{self.g.outputs.index(n)}_ptr + {off}, v{n.id}.to({TL_DTYPE[n.dtype]}), "
                f"mask={mask or default})")

    def signature(self, constexprs: list[str], extra_ptrs: tuple[str, ...] = (), values: tuple[str, ...] = ()) -> str:
        """Pointers, then (shape-generic) the leading size and the ``values`` computed from it, then constexprs."""
        ptrs = [self.ptr[b.id] for b in self.bases] + [f"out{i}_ptr" for i in range(len(self.g.outputs))]
        runtime = ["lead", *values] if self.lead is not None else []  # sizes known at run time
        return ", ".join(ptrs + list(extra_ptrs) + runtime + [f"{c}: tl.constexpr" for c in constexprs])

    def docstring(self, title: str) -> str:
        pro = self.g.prologue  # computed before the group's first node: listed first
        nodes = pro + [n for n in self.g.nodes if n not in pro] if pro else self.g.nodes
        math = "\n".join(f"        {describe(n)}" for n in nodes if n.kind != VIEW)
        ins = ", ".join(f"in{i} = {describe_external(b)}" for i, b in enumerate(self.bases))
        outs = ", ".join(f"out{i} = v{o.id}{list(o.shape)}" for i, o in enumerate(self.g.outputs))
        return f'    """{title}\n\n    Inputs: {ins}. Outputs: {outs}.\n    Math (fp32):\n{math}\n    """'

    def launcher(self, grid: str, meta: dict[str, int | str], comment: str) -> str:
        return self.launcher_multi([(f"{self.name}_kernel", grid, meta)], comment)

    def launcher_multi(self, launches: list[tuple[str, str, dict[str, int | str]]], comment: str,
                       workspace: dict[str, tuple[tuple[int | str, ...], str]] | None = None,
                       own_args: dict[int, list[str]] | None = None, values: dict[str, str] | None = None) -> str:
        """Validate the inputs, allocate outputs (and scratch ``workspace``: name -> (shape, dtype)), then
        launch each (kernel, grid, constexprs) in order: with the inputs, outputs and scratch tensors as
        arguments (and the leading size and ``values``, name -> launcher expression, for a shape-generic kernel),
        or with ``own_args[i]`` for launch ``i``."""
        args = [f"a{i}" for i in range(len(self.bases))]
        params = [f"{a}: torch.Tensor" for a in args]
        if not args:  # constants (Mamba's tril mask): computed on every call too, on the forward's device
            model_outputs = {resolve_base(o, self.plan.owner).id for o in self.plan.graph.outputs}
            if self.lead is not None or any(o.id in model_outputs for o in self.g.outputs):
                raise UnsupportedError(f"{self.name} would read no tensor: its outputs are constants")
            params = ["device: torch.device"]
        lines = [f"def {self.name}({', '.join(params)}):", f'    """{comment}"""']
        if self.lead is not None:
            lines.append(self._lead_line(args))
            lines += [f"    {k} = {v}" for k, v in (values or {}).items()]
        for a, b in zip(args, self.bases, strict=True):
            lines.append(f"    _expect({a}, {self.shape_text(b)}, {self.strides_text(b)}, '{a}')")
        lines += [f"    {ln}" for ln in self.prep]
        dev = f"{args[0]}.device" if args else "device"
        outs = []
        for i, o in enumerate(self.g.outputs):
            outs.append(f"out{i}")
            fmt = self.out_format or (CL_FORMAT[len(o.shape)] if o.attrs.get("channels_last") else "")
            fmt = f", memory_format={fmt}" if fmt else ""
            lines.append(f"    out{i} = torch.empty({self.shape_text(o)}, device={dev}, dtype={o.dtype}{fmt})")
        scratch = []
        for wname, (shape, dtype) in (workspace or {}).items():
            scratch.append(wname)
            lines.append(f"    {wname} = torch.empty({tuple_text(list(map(str, shape)))}, device={dev}, "
                         f"dtype={dtype})  # scratch" if self.lead is not None else
                         f"    {wname} = torch.empty({shape}, device={dev}, dtype={dtype})  # scratch")
        for i, (kernel, grid, meta) in enumerate(launches):
            kw = ", ".join(f"{k}={v!r}" for k, v in meta.items())
            sizes = ["lead", *(values or {})] if self.lead is not None else []
            call_args = (own_args or {}).get(i, args + outs + scratch + sizes)
            lines.append(f"    {kernel}[{grid}]({', '.join(call_args)}, {kw})")
        lines.append(f"    return {', '.join(outs)}")
        return "\n".join(lines) + "\n"

    def _lead_line(self, args: list[str]) -> str:
        """``lead = _lead(...)``: the leading size, read from the first input whose size follows it, with the
        largest size the kernel's indices hold (32-bit unless it was written with 64-bit ones)."""
        lead = self.lead
        assert lead is not None
        src = next((i for i, b in enumerate(self.bases) if lead.batched(b)), None)
        if src is None:
            raise NotGeneric(f"{self.name} writes values whose size follows the leading size from no such input")
        sized = [n for n in [*self.g.nodes, *self.bases, *self.g.outputs] if lead.batched(n)]
        per = max(lead.per_lead(numel(n.shape)) for n in sized)
        limit = ((1 << 62) if self.idx64 else IDX64_AT - 1) // per
        c, d = lead.scale[self.bases[src].id], lead.dim(self.bases[src])
        # _lead reads the first dimension: a tensor whose size follows elsewhere is read through a moved view
        t = f"{args[src]}.movedim({d}, 0)" if d else args[src]
        return f"    lead = _lead({t}, {c}, {limit}, '{args[src]}')  # the leading size of this call"


def tuple_text(items: list[str]) -> str:
    """Python text of a tuple of expressions (as ``repr`` writes a tuple of ints)."""
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def fill_expr(n: Node, idx: str) -> str:
    """A block (the shape of index ``idx``) of fill ``n``'s value; floats in fp32 as all math."""
    dt = "tl.float32" if n.dtype.is_floating_point else TL_DTYPE[n.dtype]
    return f"tl.full({idx}.shape, {literal(n.attrs['value'], n.dtype.is_floating_point)}, {dt})"


def describe(n: Node) -> str:
    def arg(a: Any) -> str:
        if isinstance(a, Node) and is_fill(a):
            return f"full({a.attrs['value']!r})"
        return f"v{a.id}" if isinstance(a, Node) else repr(a)

    if n.kind == REDUCE:
        return f"v{n.id}{list(n.shape)} = {n.op}(v{n.args[0].id}, dims={list(n.dims)})"
    extra = ", ".join(f"{k}={v}" for k, v in n.attrs.items() if k not in ("bias_of", "geometry", "per_tap"))
    body = ", ".join([arg(a) for a in n.args] + ([extra] if extra else []))
    return f"v{n.id}{list(n.shape)} = {n.op or n.kind}({body})"


def describe_external(a: Node) -> str:
    return f"{a.name or f'v{a.id}'}{list(a.shape)}"


# -- shared by row and scan kernels ------------------------------------------------------------
def run_coords(var: str, runs: tuple[tuple[int, int], ...]) -> list[tuple[int, int, str]]:
    """(size, stride, coordinate text) of each run of a row domain, outer first: ``var`` itself for one run,
    its quotient and remainder for two (the row index ``k`` or the reduced index ``r``)."""
    if len(runs) != 2:
        return [(n, st, var) for n, st in runs]
    (n0, s0), (n1, s1) = runs
    return [(n0, s0, f"({var} // {n1})"), (n1, s1, f"({var} % {n1})")]


def row_digits(dom: RowDomain, top_fixed: bool) -> Digits:
    """The digits of a row kernel's ``lin`` (``_exprs.Digits``), from the coordinates ``row_index_lines``
    builds it of; ``top_fixed``: False where the outermost run's size follows the leading size."""
    runs = [(n, st, t, True) for n, st, t in run_coords("k", dom.kept_runs)]
    runs += [(n, st, t, False) for n, st, t in run_coords("r", dom.red_runs)]
    return Digits(tuple(sorted(runs, key=lambda run: run[1])), top_fixed)


def row_index_lines(g: Group, i64: bool, rows: str | None = None,
                    stride: Callable[[int], str] = str) -> tuple[list[str], str]:
    """Lines computing the kept part of the row-major index, and the expression of the reduced part;
    ``rows``: the number of rows as kernel text (default: the literal); ``stride``: a run's stride as text."""
    dom = g.domain
    assert dom is not None

    def part(var: str, runs: tuple[tuple[int, int], ...]) -> str:
        terms = [t if st == 1 else f"{t} * {stride(st)}" for _, st, t in run_coords(var, runs)]
        return " + ".join(terms) or "0"

    pid = "tl.program_id(0).to(tl.int64)" if i64 else "tl.program_id(0)"
    lines = [f"k = {pid} * BLOCK_K + tl.arange(0, BLOCK_K)[:, None]",
             f"kmask = k < {rows or dom.k}",
             f"kbase = {part('k', dom.kept_runs)}"]
    return lines, part("r", dom.red_runs)


# -- shared by pooling and depthwise convolution windows ------------------------------------------
def channel_fastest_lines(g: Group, x: Node, x_strides: tuple[int, ...]) -> list[str]:
    """net-cl: where a window kernel reads a channels-last input and stores only channels-last outputs,
    lines that turn the lanes' walk index into the row-major output index ``lin`` of the element at that
    channels-last position (channel fastest), so that neighbouring lanes load and store neighbouring
    addresses; no lines otherwise."""
    shape = g.outputs[0].shape if g.outputs else ()
    if len(shape) not in (4, 5) or len(x.shape) != len(shape) or not all(
            o.attrs.get("channels_last") and o.shape == shape for o in g.outputs):
        return []
    c, s = shape[1], numel(shape[2:])
    x_cl = channels_last_strides(x.shape)
    if c == 1 or s == 1 or any(a != b for a, b, n in zip(x_strides, x_cl, x.shape, strict=True) if n > 1):
        return []
    return [f"c_ = lin % {c}  # the lanes walk channels-last: channel fastest",
            f"s_ = lin // {c}  # (batch, position) of the element",
            f"lin = (s_ // {s}) * {c * s} + c_ * {s} + s_ % {s}  # its row-major output index"]


@dataclass(frozen=True)
class WindowDim:
    """One windowed dimension: input size, output size, kernel, stride, padding, dilation, input stride."""

    i: int
    o: int
    k: int
    s: int
    p: int
    d: int
    st: int

    @property
    def low(self) -> bool:
        """Can a window position fall before the input (into the left padding)?"""
        return self.p > 0

    @property
    def high(self) -> bool:
        """Can a window position fall past the input (right padding, or ceil_mode's partial window)?"""
        return (self.o - 1) * self.s - self.p + (self.k - 1) * self.d >= self.i
