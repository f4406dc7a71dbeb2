"""ATen op -> small-graph lowerings. Composite ops (softmax, norms, losses) become reductions plus
pointwise ops, so one generic row kernel covers them all."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tritonsmith.agents.builtin._convcl import channels_last_strides
from tritonsmith.agents.builtin._ir import (
    CONV, PW, SCAN, SMS, VIEW, WINDOW, Node, UnsupportedError, contiguous_strides, is_fill,
)
from tritonsmith.agents.builtin._rnn import lower_rnn

if TYPE_CHECKING:
    from tritonsmith.agents.builtin._ir import Lowering as _Lowering

aten = torch.ops.aten
LOWERINGS: dict[Any, Callable[..., Any]] = {}
_SPLIT_MIN = 1 << 18  # a whole-tensor reduction this large is split in two stages (one program is too slow)
_SPLIT_K_CHUNK = 128  # the least K a split-K chunk keeps: 4 steps of BLOCK_K = 32


def _reg(*targets: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for t in targets:
            LOWERINGS[t] = fn
        return fn
    return deco


def _unary(op: str) -> Callable[..., Any]:
    return lambda lw, fx, x, *a, **k: lw.pw(op, x)


for _t, _op in {aten.relu.default: "relu", aten.sigmoid.default: "sigmoid", aten.tanh.default: "tanh",
                aten.abs.default: "abs", aten.exp.default: "exp", aten.log.default: "log",
                aten.log1p.default: "log1p", aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt",
                aten.neg.default: "neg", aten.expm1.default: "expm1", aten.erf.default: "erf",
                aten.reciprocal.default: "reciprocal", aten.sign.default: "sign"}.items():
    LOWERINGS[_t] = _unary(_op)


@_reg(aten.add.Tensor, aten.add.Scalar)
def _add(lw: _Lowering, fx: Any, a: Any, b: Any, alpha: Any = 1) -> Node:
    return lw.pw("add", a, b if alpha == 1 else _scaled(lw, b, alpha))


@_reg(aten.sub.Tensor, aten.sub.Scalar)
def _sub(lw: _Lowering, fx: Any, a: Any, b: Any, alpha: Any = 1) -> Node:
    return lw.pw("sub", a, b if alpha == 1 else _scaled(lw, b, alpha))


@_reg(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(lw: _Lowering, fx: Any, a: Any, b: Any, alpha: Any = 1) -> Node:
    return lw.pw("sub", b, a if alpha == 1 else _scaled(lw, a, alpha))


def _scaled(lw: _Lowering, x: Any, s: Any) -> Any:
    return lw.pw("mul", x, s) if isinstance(x, Node) else x * s


_BINARY = {aten.mul.Tensor: "mul", aten.mul.Scalar: "mul", aten.div.Tensor: "div", aten.div.Scalar: "div",
           aten.minimum.default: "minimum", aten.maximum.default: "maximum",
           aten.pow.Tensor_Tensor: "pow"}
_COMPARE = {"gt": "gt", "lt": "lt", "ge": "ge", "le": "le", "eq": "eq", "ne": "ne"}
for _t, _op in _BINARY.items():
    LOWERINGS[_t] = (lambda op: lambda lw, fx, a, b, **k: lw.pw(op, a, b))(_op)
for _name, _op in _COMPARE.items():
    for _ov in ("Scalar", "Tensor"):
        LOWERINGS[getattr(getattr(aten, _name), _ov)] = (
            lambda op: lambda lw, fx, a, b: lw.pw(op, a, b, dtype=torch.bool))(_op)


@_reg(aten.where.self)
def _where(lw: _Lowering, fx: Any, c: Any, a: Any, b: Any) -> Node:
    return lw.pw("where", c, a, b, dtype=fx.meta["val"].dtype)


@_reg(aten.clamp.default, aten.clamp.Tensor)
def _clamp(lw: _Lowering, fx: Any, x: Node, min: Any = None, max: Any = None) -> Node:  # noqa: A002
    if isinstance(min, Node) or isinstance(max, Node):
        x = lw.pw("maximum", x, min) if min is not None else x
        return lw.pw("minimum", x, max) if max is not None else x
    return lw.pw("clamp", x, lo=min, hi=max)


@_reg(aten.hardtanh.default)
def _hardtanh(lw: _Lowering, fx: Any, x: Node, lo: float = -1.0, hi: float = 1.0) -> Node:
    return lw.pw("clamp", x, lo=lo, hi=hi)


@_reg(aten.leaky_relu.default)
def _leaky(lw: _Lowering, fx: Any, x: Node, slope: float = 0.01) -> Node:
    return lw.pw("leaky_relu", x, slope=float(slope))


@_reg(aten.gelu.default)
def _gelu(lw: _Lowering, fx: Any, x: Node, approximate: str = "none") -> Node:
    return lw.pw("gelu_tanh" if approximate == "tanh" else "gelu", x)


@_reg(aten.elu.default)
def _elu(lw: _Lowering, fx: Any, x: Node, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Node:
    return lw.pw("elu", x, alpha=float(alpha), scale=float(scale), input_scale=float(input_scale))


@_reg(aten.pow.Tensor_Scalar)
def _pow(lw: _Lowering, fx: Any, x: Node, e: Any) -> Node:
    if e == 2:
        return lw.pw("mul", x, x)
    if e == 3:
        return lw.pw("mul", lw.pw("mul", x, x), x)
    if e == 0.5:
        return lw.pw("sqrt", x)
    if e == 1:
        return x
    if e == -1:
        return lw.pw("reciprocal", x)
    raise UnsupportedError(f"pow with exponent {e}")


@_reg(aten._to_copy.default)
def _to_copy(lw: _Lowering, fx: Any, x: Node, dtype: Any = None, **_: Any) -> Node:
    dtype = dtype or x.dtype
    return x if dtype == x.dtype else lw.pw("cast", x, dtype=dtype)


@_reg(aten.copy.default)
def _copy(lw: _Lowering, fx: Any, dst: Node, src: Any, non_blocking: bool = False) -> Any:
    """``dst.copy_(src)`` (functionalized: a buffer mutation): the value is ``src`` broadcast to ``dst``'s shape
    in ``dst``'s dtype; ``dst``'s old contents are not read."""
    if not isinstance(src, Node) or not isinstance(dst, Node):
        raise UnsupportedError("copy_ of a value that is not a tensor")
    out = src if src.shape == dst.shape else lw.expand(src, dst.shape)
    return out if out.dtype == dst.dtype else lw.pw("cast", out, dtype=dst.dtype)


@_reg(aten.randn.default, aten.rand.default, aten.randn_like.default, aten.rand_like.default)
def _random(lw: _Lowering, fx: Any, size_or_x: Any, *_: Any, **__: Any) -> Node:
    """Random tensors made in forward (an LSTM's random initial states) stay torch calls: no kernel can
    reproduce the reference's draws, so the candidate draws from the same distribution the same way; the
    evaluator decides whether the output depends on the draws."""
    val = fx.meta["val"]
    fn = "randn" if "randn" in str(fx.target) else "rand"
    if isinstance(size_or_x, Node):
        return lw.extern(f"torch.{fn}_like({{0}})", (size_or_x,), val, op=fn)
    if not lw.g.inputs:
        raise UnsupportedError(f"torch.{fn} in a forward without tensor inputs (no device to draw on)")
    # the size apart from the call: where it follows the leading size, the forward writes it at run time
    size = tuple(int(v) for v in val.shape)
    return lw.extern(f"torch.{fn}({{size}}, dtype={val.dtype}, device={{0}}.device)", (lw.g.inputs[0],), val, op=fn,
                     size=size)


@_reg(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default, aten.contiguous.default)
def _identity(lw: _Lowering, fx: Any, x: Node, **_: Any) -> Node:
    return x


@_reg(aten.scalar_tensor.default)
def _scalar_tensor(lw: _Lowering, fx: Any, v: Any, **_: Any) -> Any:
    return v


@_reg(aten.native_dropout.default)
def _dropout(lw: _Lowering, fx: Any, x: Node, p: float, train: bool | None) -> tuple[Any, Any]:
    if train and p > 0:
        raise UnsupportedError(f"dropout with p={p} in training mode is random; no kernel can match it")
    return x, None


# -- views ----------------------------------------------------------------------------------------
@_reg(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(lw: _Lowering, fx: Any, x: Node, shape: Any) -> Node:
    return lw.view(x, tuple(shape))


@_reg(aten.unsqueeze.default)
def _unsqueeze(lw: _Lowering, fx: Any, x: Node, d: int) -> Node:
    return lw.view(x, tuple(fx.meta["val"].shape))


@_reg(aten.squeeze.dims, aten.squeeze.dim, aten.squeeze.default)
def _squeeze(lw: _Lowering, fx: Any, x: Node, *a: Any) -> Node:
    return lw.view(x, tuple(fx.meta["val"].shape))


@_reg(aten.permute.default)
def _permute(lw: _Lowering, fx: Any, x: Node, dims: Any) -> Node:
    return lw.permute(x, list(dims))


@_reg(aten.t.default)
def _t(lw: _Lowering, fx: Any, x: Node) -> Node:
    return lw.permute(x, [1, 0]) if len(x.shape) == 2 else x


@_reg(aten.transpose.int)
def _transpose(lw: _Lowering, fx: Any, x: Node, a: int, b: int) -> Node:
    dims = list(range(len(x.shape)))
    dims[a], dims[b] = dims[b], dims[a]
    return lw.permute(x, dims)


@_reg(aten.select.int)
def _select(lw: _Lowering, fx: Any, x: Node, dim: int, index: int) -> Node:
    dim %= len(x.shape)
    index %= x.shape[dim]
    shape = tuple(s for i, s in enumerate(x.shape) if i != dim)
    return lw._view_like(x, shape, "select", lambda t: t.select(dim, index), dim=dim, index=index)


@_reg(aten.slice.Tensor)
def _slice(lw: _Lowering, fx: Any, x: Node, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Node:
    dim %= len(x.shape)
    lo, hi, _ = slice(start, end, step).indices(x.shape[dim])
    shape = tuple(fx.meta["val"].shape)
    if shape == x.shape:
        return x
    index = (slice(None),) * dim + (slice(lo, hi, step),)
    return lw._view_like(x, shape, "slice", lambda t: t[index], dim=dim, start=lo, end=hi, step=step)


@_reg(aten.split_with_sizes.default, aten.split.Tensor)
def _split(lw: _Lowering, fx: Any, x: Node, sizes: Any, dim: int = 0) -> tuple[Node, ...]:
    """``torch.split`` / ``chunk`` (``q, k, v = qkv.split(n, dim=2)``, a GRU cell's gates): one slice view per
    piece, read through strides by the kernels after it."""
    dim %= len(x.shape)
    n = x.shape[dim]
    if isinstance(sizes, int):
        sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if sizes > 0 else [n]
    pieces, start = [], 0
    for size in sizes:
        end = start + int(size)
        shape = x.shape[:dim] + (end - start,) + x.shape[dim + 1:]
        index = (slice(None),) * dim + (slice(start, end, 1),)
        pieces.append(x if shape == x.shape else lw._view_like(
            x, shape, "slice", lambda t, index=index: t[index], dim=dim, start=start, end=end, step=1))
        start = end
    return tuple(pieces)


@_reg(aten.unbind.int)
def _unbind(lw: _Lowering, fx: Any, x: Node, dim: int = 0) -> tuple[Node, ...]:
    dim %= len(x.shape)
    shape = tuple(s for i, s in enumerate(x.shape) if i != dim)
    return tuple(lw._view_like(x, shape, "select", lambda t, i=i: t.select(dim, i), dim=dim, index=i)
                 for i in range(x.shape[dim]))


@_reg(aten.repeat.default)
def _repeat(lw: _Lowering, fx: Any, x: Node, repeats: Any) -> Node:
    """``x.repeat(r0, r1, ...)`` (InstanceNorm's affine weights, tiled per sample): each dim ``s`` becomes
    ``(r, s)`` broadcast, then merged: a broadcast read, copied only where a kernel needs it contiguous."""
    reps = [int(r) for r in repeats]
    shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    y = lw.view(x, tuple(v for s in shape for v in (1, s)))
    y = lw.expand(y, tuple(v for r, s in zip(reps, shape, strict=True) for v in (r, s)))
    return lw.view(y, tuple(r * s for r, s in zip(reps, shape, strict=True)))


@_reg(aten.expand.default)
def _expand(lw: _Lowering, fx: Any, x: Node, shape: Any, **_: Any) -> Node:
    return lw.expand(x, tuple(shape))


# -- reductions -----------------------------------------------------------------------------------
def reduce_all_split(lw: _Lowering, op: str, x: Node, dims: tuple[int, ...] | None, keepdim: bool) -> Node:
    """A reduction over every element of a big tensor runs in two stages (partial rows, then the rest)."""
    n = x.numel
    if op in ("sum", "max", "min") and (not dims or len(set(d % len(x.shape) for d in dims)) == len(x.shape)) \
            and n >= _SPLIT_MIN:
        s = 1024
        while s > 1 and n % s:
            s //= 2
        if s >= 64:
            part = lw.reduce(op, lw.view(x, (s, n // s)), (1,), False)
            total = lw.reduce(op, part, (0,), True)
            shape = tuple(1 for _ in x.shape) if keepdim else ()
            return lw.view(total, shape)
    return lw.reduce(op, x, dims, keepdim)


@_reg(aten.sum.dim_IntList, aten.sum.default)
def _sum(lw: _Lowering, fx: Any, x: Node, dims: Any = None, keepdim: bool = False, dtype: Any = None) -> Node:
    out = reduce_all_split(lw, "sum", x, tuple(dims) if dims else None, keepdim)
    return lw.pw("cast", out, dtype=dtype) if dtype is not None and dtype != out.dtype else out


@_reg(aten.mean.dim, aten.mean.default)
def _mean(lw: _Lowering, fx: Any, x: Node, dims: Any = None, keepdim: bool = False, dtype: Any = None) -> Node:
    total = reduce_all_split(lw, "sum", x, tuple(dims) if dims else None, keepdim)
    return lw.pw("div", total, float(x.numel // max(total.numel, 1)))


@_reg(aten.amax.default, aten.amin.default)
def _amax(lw: _Lowering, fx: Any, x: Node, dims: Any = (), keepdim: bool = False) -> Node:
    op = "max" if fx.target is aten.amax.default else "min"
    return reduce_all_split(lw, op, x, tuple(dims) if dims else None, keepdim)


@_reg(aten.max.dim, aten.min.dim)
def _max_dim(lw: _Lowering, fx: Any, x: Node, dim: int, keepdim: bool = False) -> tuple[Node, Node]:
    op = "max" if fx.target is aten.max.dim else "min"
    return lw.reduce(op, x, (dim,), keepdim), lw.reduce("arg" + op, x, (dim,), keepdim)


@_reg(aten.max.default, aten.min.default)
def _max_all(lw: _Lowering, fx: Any, x: Node) -> Node:
    return reduce_all_split(lw, "max" if fx.target is aten.max.default else "min", x, None, False)


@_reg(aten.argmax.default, aten.argmin.default)
def _argmax(lw: _Lowering, fx: Any, x: Node, dim: Any = None, keepdim: bool = False) -> Node:
    if dim is None:
        raise UnsupportedError("argmax/argmin over the flattened tensor")
    op = "argmax" if fx.target is aten.argmax.default else "argmin"
    return lw.reduce(op, x, (dim,), keepdim)


@_reg(aten.linalg_vector_norm.default)
def _norm(lw: _Lowering, fx: Any, x: Node, ord: Any = 2, dim: Any = None, keepdim: bool = False,  # noqa: A002
          dtype: Any = None) -> Node:
    dims = tuple(dim) if dim else None
    if ord == 2:
        return lw.pw("sqrt", reduce_all_split(lw, "sum", lw.pw("mul", x, x), dims, keepdim))
    if ord == 1:
        return reduce_all_split(lw, "sum", lw.pw("abs", x), dims, keepdim)
    if ord == math.inf:
        return reduce_all_split(lw, "max", lw.pw("abs", x), dims, keepdim)
    raise UnsupportedError(f"vector norm of order {ord}")


@_reg(aten.var.correction)
def _var(lw: _Lowering, fx: Any, x: Node, dims: Any = None, *, correction: Any = 1, keepdim: bool = False) -> Node:
    dims_t = tuple(dims) if dims else tuple(range(len(x.shape)))
    mean, var = _moments(lw, x, dims_t)
    n = x.numel // mean.numel
    out = lw.pw("mul", var, n / max(n - (1 if correction is None else correction), 1))
    return out if keepdim else lw.view(out, tuple(fx.meta["val"].shape))


def _moments(lw: _Lowering, x: Node, dims: tuple[int, ...]) -> tuple[Node, Node]:
    """Mean and biased variance over ``dims`` (two passes: exact, unlike E[x^2] - E[x]^2)."""
    total = lw.reduce("sum", x, dims, True)
    n = float(x.numel // total.numel)
    mean = lw.pw("div", total, n)
    d = lw.pw("sub", x, mean)
    var = lw.pw("div", lw.reduce("sum", lw.pw("mul", d, d), dims, True), n)
    return mean, var


@_reg(aten._softmax.default)
def _softmax(lw: _Lowering, fx: Any, x: Node, dim: int, half: bool = False) -> Node:
    e = lw.pw("exp", lw.pw("sub", x, lw.reduce("max", x, (dim,), True)))
    return lw.pw("div", e, lw.reduce("sum", e, (dim,), True))


@_reg(aten._log_softmax.default)
def _log_softmax(lw: _Lowering, fx: Any, x: Node, dim: int, half: bool = False) -> Node:
    t = lw.pw("sub", x, lw.reduce("max", x, (dim,), True))
    return lw.pw("sub", t, lw.pw("log", lw.reduce("sum", lw.pw("exp", t), (dim,), True)))


@_reg(aten.gather.default)
def _gather(lw: _Lowering, fx: Any, x: Node, dim: int, index: Node, **_: Any) -> Node:
    dim %= len(x.shape)
    want = tuple(1 if i == dim else s for i, s in enumerate(x.shape))
    if index.shape != want:
        raise UnsupportedError("gather other than picking one element per row")
    hit = lw.pw("eq", lw.pw("iota", x, dtype=torch.int64, dim=dim), index, dtype=torch.bool)
    return lw.reduce("sum", lw.pw("where", hit, x, 0.0), (dim,), True)


# -- normalizations -------------------------------------------------------------------------------
def _affine(lw: _Lowering, y: Node, w: Node | None, b: Node | None, channel_dim: int) -> Node:
    """``y * w + b`` with ``w``, ``b`` of shape (C,) broadcast along ``channel_dim`` of ``y``."""
    trail = len(y.shape) - channel_dim - 1
    if w is not None:
        y = lw.pw("mul", y, lw.view(w, (w.numel,) + (1,) * trail))
    if b is not None:
        y = lw.pw("add", y, lw.view(b, (b.numel,) + (1,) * trail))
    return y


@_reg(aten.native_layer_norm.default)
def _layer_norm(lw: _Lowering, fx: Any, x: Node, shape: Any, w: Node | None, b: Node | None, eps: float) -> tuple:
    dims = tuple(range(len(x.shape) - len(shape), len(x.shape)))
    mean, var = _moments(lw, x, dims)
    rstd = lw.pw("rsqrt", lw.pw("add", var, float(eps)))
    y = lw.pw("mul", lw.pw("sub", x, mean), rstd)
    if w is not None:
        y = lw.pw("mul", y, w)
    if b is not None:
        y = lw.pw("add", y, b)
    return y, mean, rstd


@_reg(aten.native_group_norm.default)
def _group_norm(lw: _Lowering, fx: Any, x: Node, w: Node | None, b: Node | None, n: int, c: int, hw: int,
                groups: int, eps: float) -> tuple:
    xv = lw.view(x, (n, groups, (c // groups) * hw))
    mean, var = _moments(lw, xv, (2,))
    rstd = lw.pw("rsqrt", lw.pw("add", var, float(eps)))
    y = lw.view(lw.pw("mul", lw.pw("sub", xv, mean), rstd), x.shape)
    return _affine(lw, y, w, b, 1), mean, rstd


def _batch_norm(lw: _Lowering, x: Node, w: Node | None, b: Node | None, rm: Node | None, rv: Node | None,
                training: bool, eps: float) -> tuple:
    trail = len(x.shape) - 2
    if training or rm is None:
        mean, var = _moments(lw, x, (0, *range(2, len(x.shape))))
    else:
        mean, var = lw.view(rm, (rm.numel,) + (1,) * trail), lw.view(rv, (rv.numel,) + (1,) * trail)
    rstd = lw.pw("rsqrt", lw.pw("add", var, float(eps)))
    y = lw.pw("mul", lw.pw("sub", x, mean), rstd)
    return _affine(lw, y, w, b, 1), mean, rstd, None, None


@_reg(aten._native_batch_norm_legit_functional.default)
def _bn_functional(lw: _Lowering, fx: Any, x: Node, w: Any, b: Any, rm: Any, rv: Any, training: bool,
                   momentum: float, eps: float) -> tuple:
    return _batch_norm(lw, x, w, b, rm, rv, training, eps)


@_reg(aten._native_batch_norm_legit_no_training.default)
def _bn_eval(lw: _Lowering, fx: Any, x: Node, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float) -> tuple:
    return _batch_norm(lw, x, w, b, rm, rv, False, eps)[:3]


@_reg(aten._native_batch_norm_legit.no_stats)
def _bn_no_stats(lw: _Lowering, fx: Any, x: Node, w: Any, b: Any, training: bool, momentum: float, eps: float) -> tuple:
    return _batch_norm(lw, x, w, b, None, None, True, eps)[:3]


@_reg(aten._native_batch_norm_legit.default)
def _bn_legit(lw: _Lowering, fx: Any, x: Node, w: Any, b: Any, rm: Any, rv: Any, training: bool,
              momentum: float, eps: float) -> tuple:
    return _batch_norm(lw, x, w, b, rm, rv, training, eps)[:3]


# -- matmuls --------------------------------------------------------------------------------------
def _fill_value(n: Node) -> Any:
    """The constant of a fill seen through views (a zero initial state ``h @ W``), else None."""
    while n.kind == VIEW:
        n = n.args[0]
    return n.attrs["value"] if is_fill(n) else None


def _mm_of_fill(lw: _Lowering, a: Node, b: Node) -> Node | None:
    """A product with a constant operand has nothing to multiply: ``c * 1 @ B`` is ``c`` times B's column
    sums, ``A @ c * 1`` ``c`` times A's row sums, a zero operand a zero fill (no kernel reads a fill)."""
    ca, cb = _fill_value(a), _fill_value(b)
    if ca is None and cb is None:
        return None
    shape = (*a.shape[:-1], b.shape[-1])
    if ca == 0 or cb == 0:
        return lw.g.add(Node(PW, shape, a.dtype, op="full", attrs={"value": 0.0}))
    sums = lw.reduce("sum", b, (len(b.shape) - 2,), True) if ca is not None else \
        lw.reduce("sum", a, (len(a.shape) - 1,), True)
    if ca is not None and cb is not None:
        sums = lw.g.add(Node(PW, sums.shape, a.dtype, op="full", attrs={"value": float(cb) * a.shape[-1]}))
    return lw.expand(lw.pw("mul", sums, float(ca if ca is not None else cb)), shape)


@_reg(aten.mm.default, aten.bmm.default)
def _mm(lw: _Lowering, fx: Any, a: Node, b: Node) -> Node:
    const = _mm_of_fill(lw, a, b)
    if const is not None:
        return const
    if len(a.shape) == 2 and a.addressable and b.addressable:
        m, k = a.shape
        n = b.shape[1]
        if n == 1:  # matrix-vector: a row reduction streams A once, a matmul tile would waste 15/16
            return lw.reduce("sum", lw.pw("mul", a, lw.view(b, (1, k))), (1,), True)
        if m == 1:
            return lw.reduce("sum", lw.pw("mul", lw.view(a, (k, 1)), b), (0,), True)
    if len(a.shape) == 2:
        (m, k), n = a.shape, b.shape[1]
        split = lw.options.get("split_k")
        if split is None:  # chosen here; at another leading size, as at the first (options split_k_auto)
            again, i = lw.options.get("split_k_auto") or [], len(lw.split_k_auto)
            split = again[i] if i < len(again) else split_k_for(m, n, k)
            lw.split_k_auto.append(split)
        if split > 1 and k % split == 0:
            # [S, m, k / S] @ [S, k / S, n]: views of A and B (of the stored value, where A is computed)
            partials = lw.mm(lw.permute(lw.view(a, (m, split, k // split)), [1, 0, 2]),
                             lw.view(b, (split, k // split, n)))
            partials.attrs["split_k"] = split
            return lw.reduce("sum", partials, (0,), False)
    return lw.mm(a, b)


def split_k_for(m: int, n: int, k: int) -> int:
    """How many K chunks an fp32 ``[m, k] @ [k, n]`` is split into when no variant says (0: none).

    With tiles of 128 or 64 rows by 64 columns (the fp32 default) a small output makes few programs, each
    walking the whole K loop alone: 32_ConvolutionalVisionTransformer's ``[10, 8192] @ [8192, 128]`` ran as
    2 programs of 256 K steps, 0.28 ms on the H100 (2026-12-07, where_time_goes), where the weight's 4 MB
    stream in ~1 us. Split into S chunks, ``S * tiles`` programs write partial products ``[S, m, n]`` and a
    row kernel sums them (with the epilogue). S doubles while the programs fit one wave and each chunk
    keeps at least ``_SPLIT_K_CHUNK`` of K (a pipelined loop of 4+ steps); only where the tiles fill under a
    quarter of the SMs and K takes 16+ steps: there one program's loop (~0.9 us a step on the H100: 32's
    ``[20, 512] @ [512, 128]``, 16 steps, 19.6 us; its 4-step matmuls 6.3 us) outweighs the sum's launch.
    """
    tiles = -(-m // (128 if m > 64 else 64)) * -(-n // 64)
    if tiles * 4 > SMS or k < 4 * _SPLIT_K_CHUNK:
        return 0
    split = 1
    while tiles * split * 2 <= SMS and k % (split * 2) == 0 and k // (split * 2) >= _SPLIT_K_CHUNK:
        split *= 2
    return split if split > 1 else 0


@_reg(aten.addmm.default)
def _addmm(lw: _Lowering, fx: Any, bias: Node, a: Node, b: Node, beta: Any = 1, alpha: Any = 1) -> Node:
    out = _mm(lw, fx, a, b)
    if alpha != 1:
        out = lw.pw("mul", out, alpha)
    return lw.pw("add", out, bias if beta == 1 else _scaled(lw, bias, beta))


# -- convolutions: depthwise ones are window kernels (_dwconv.py); the rest stay torch calls (hybrid) ---
@_reg(aten.convolution.default)
def _conv(lw: _Lowering, fx: Any, x: Node, w: Node, b: Node | None, stride: Any, padding: Any, dilation: Any,
          transposed: bool, output_padding: Any, groups: int) -> Node:
    nd = len(w.shape) - 2
    val = fx.meta["val"]
    if _depthwise(x, w, val, transposed, groups):
        out = dwconv(lw, x, w, val, stride, padding, dilation)
        return out if b is None else lw.pw("add", out, lw.view(b, (b.numel,) + (1,) * nd))
    if lw.options.get("conv") == "triton" and _gemm_conv(x, w, val):
        out = gemm_conv(lw, x, w, val, (stride, padding, dilation, output_padding), transposed, groups)
        return out if b is None else lw.pw("add", out, lw.view(b, (b.numel,) + (1,) * nd))
    # conv-cl variant (_convcl.py): a channels-last copy of the input makes cuDNN's output channels-last too
    cl = bool(lw.options.get("conv_cl")) and nd in (2, 3) and x.strides == contiguous_strides(x.shape)
    src = "_to_channels_last({0})" if cl else "{0}"
    if transposed:
        call = (f"F.conv_transpose{nd}d({src}, {{1}}, None, stride={tuple(stride)}, padding={tuple(padding)}, "
                f"output_padding={tuple(output_padding)}, groups={groups}, dilation={tuple(dilation)})")
    else:
        call = (f"F.conv{nd}d({src}, {{1}}, None, stride={tuple(stride)}, padding={tuple(padding)}, "
                f"dilation={tuple(dilation)}, groups={groups})")
    geometry = {"kernel": tuple(int(k) for k in w.shape[2:]), "stride": _per_dim(stride, nd),
                "padding": _per_dim(padding, nd), "dilation": _per_dim(dilation, nd),
                "output_padding": _per_dim(output_padding, nd), "groups": int(groups), "transposed": bool(transposed)}
    out = lw.extern(call, (x, w), val, op="conv_transpose" if transposed else "conv", geometry=geometry)
    if cl:
        out.strides, out.attrs["channels_last"] = channels_last_strides(out.shape), True
    if b is None:
        return out
    # the bias joins the fused epilogue of the Triton kernel after the call
    return lw.pw("add", out, lw.view(b, (b.numel,) + (1,) * nd), bias_of="conv")


def _depthwise(x: Node, w: Node, val: Any, transposed: bool, groups: int) -> bool:
    """A depthwise convolution (groups == in_channels > 1, one input channel per filter, not transposed,
    1-D to 3-D, floating point, batched): written as a window kernel; every other convolution stays a torch
    call (a dense conv is compute-bound: cuDNN's implicit GEMM on tensor cores is the right tool)."""
    nd = len(w.shape) - 2
    return (not transposed and 1 <= nd <= 3 and len(x.shape) == nd + 2 and groups > 1 and x.shape[1] == groups
            and w.shape[1] == 1 and w.shape[0] % groups == 0 and x.dtype.is_floating_point
            and w.dtype == x.dtype and val.dtype == x.dtype)


def _gemm_conv(x: Node, w: Node, val: Any) -> bool:
    """A convolution the implicit-GEMM family writes (``_convgemm.py``): 1-D to 3-D, batched, floating point,
    one dtype throughout."""
    nd = len(w.shape) - 2
    return (1 <= nd <= 3 and len(x.shape) == nd + 2 and x.dtype.is_floating_point and w.dtype == x.dtype
            and val.dtype == x.dtype)


def gemm_conv(lw: _Lowering, x: Node, w: Node, val: Any, geometry: tuple[Any, Any, Any, Any], transposed: bool,
              groups: int) -> Node:
    """A dense, grouped or transposed convolution without bias as a CONV node (args (x, weight)); attrs give
    kernel/stride/padding/dilation/output_padding per spatial dim, ``groups`` and ``transposed``."""
    nd = len(w.shape) - 2
    stride, padding, dilation, output_padding = (_per_dim(v, nd) for v in geometry)
    return lw.g.add(Node(CONV, tuple(val.shape), val.dtype, args=(x, w), op="conv_transpose" if transposed else "conv",
                         attrs={"kernel": tuple(int(s) for s in w.shape[2:]), "stride": stride, "padding": padding,
                                "dilation": dilation, "output_padding": output_padding, "groups": int(groups),
                                "transposed": bool(transposed)}))


def dwconv(lw: _Lowering, x: Node, w: Node, val: Any, stride: Any, padding: Any, dilation: Any) -> Node:
    """Depthwise convolution without bias as a WINDOW node (op ``dwconv``, args (x, weight)); attrs give
    kernel/stride/padding/dilation per spatial dim and ``mult``, the output channels per input channel."""
    nd = len(w.shape) - 2
    k = tuple(int(s) for s in w.shape[2:])
    s, p, d = _per_dim(stride, nd), _per_dim(padding, nd), _per_dim(dilation, nd)
    return lw.g.add(Node(WINDOW, tuple(val.shape), val.dtype, args=(x, w), op="dwconv",
                         attrs={"kernel": k, "stride": s, "padding": p, "dilation": d,
                                "mult": w.shape[0] // x.shape[1]}))


# -- pooling windows and scans: Triton kernels of their own (_window.py, _scan.py) -----------------
_MAX_POOL = {aten.max_pool1d_with_indices.default: 1, aten.max_pool2d_with_indices.default: 2,
             aten.max_pool3d_with_indices.default: 3, aten.max_pool1d.default: 1, aten.max_pool2d.default: 2,
             aten.max_pool3d.default: 3}
_AVG_POOL = {aten.avg_pool1d.default: 1, aten.avg_pool2d.default: 2, aten.avg_pool3d.default: 3}


def _per_dim(v: Any, nd: int) -> tuple[int, ...]:
    """A pooling argument (int, [v] or [v1, ..., vnd]) as one int per pooled dimension."""
    if isinstance(v, int):
        return (v,) * nd
    t = tuple(int(x) for x in v)
    return t * nd if len(t) == 1 else t


def window(lw: _Lowering, op: str, x: Node, val: Any, nd: int, kernel: Any, stride: Any, padding: Any,
           dilation: Any, ceil_mode: bool, **attrs: Any) -> Node:
    """A pooling window over the last ``nd`` dims of ``x``, described for every dim of ``x`` (kernel, stride,
    padding, dilation): leading dims and pooled dims that copy their input get the identity window (1, 1, 0, 1)."""
    if not x.dtype.is_floating_point:
        raise UnsupportedError(f"{op} pooling of a {x.dtype} tensor (only floating point is written)")
    k = _per_dim(kernel, nd)
    s = _per_dim(stride, nd) if stride else k  # an empty stride means stride = kernel
    p, d = _per_dim(padding, nd), _per_dim(dilation, nd)
    lead = len(x.shape) - nd
    win: list[tuple[int, int, int, int]] = [(1, 1, 0, 1)] * lead
    for i in range(nd):
        copy = k[i] == 1 and p[i] == 0 and (s[i] == 1 or x.shape[lead + i] == 1)
        win.append((1, 1, 0, 1) if copy else (k[i], s[i], p[i], d[i]))
    kern, strd, pad, dil = (tuple(w[j] for w in win) for j in range(4))
    return lw.g.add(Node(WINDOW, tuple(val.shape), val.dtype, args=(x,), op=op,
                         attrs={"kernel": kern, "stride": strd, "padding": pad, "dilation": dil,
                                "ceil_mode": bool(ceil_mode), **attrs}))


@_reg(*_MAX_POOL)
def _max_pool(lw: _Lowering, fx: Any, x: Node, kernel: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1,
              ceil_mode: bool = False) -> Any:
    with_indices = isinstance(fx.meta["val"], (tuple, list))
    if with_indices and any(u.target is operator.getitem and u.args[1] == 1 and u.users for u in fx.users):
        raise UnsupportedError("max pooling with return_indices=True: the generator writes the pooled values "
                               "only, not the argmax indices")
    val = fx.meta["val"][0] if with_indices else fx.meta["val"]
    out = window(lw, "max", x, val, _MAX_POOL[fx.target], kernel, stride, padding, dilation, ceil_mode)
    return (out, None) if with_indices else out


@_reg(*_AVG_POOL)
def _avg_pool(lw: _Lowering, fx: Any, x: Node, kernel: Any, stride: Any = (), padding: Any = 0, ceil_mode: bool = False,
              count_include_pad: bool = True, divisor_override: Any = None) -> Node:
    return window(lw, "avg", x, fx.meta["val"], _AVG_POOL[fx.target], kernel, stride, padding, 1, ceil_mode,
                  count_include_pad=bool(count_include_pad),
                  divisor_override=None if divisor_override is None else int(divisor_override))


_ADAPTIVE = {aten._adaptive_avg_pool2d.default: ("avg", 2), aten._adaptive_avg_pool3d.default: ("avg", 3),
             aten.adaptive_max_pool2d.default: ("max", 2), aten.adaptive_max_pool3d.default: ("max", 3),
             aten.adaptive_max_pool1d.default: ("max", 1)}


@_reg(*_ADAPTIVE)
def _adaptive_pool(lw: _Lowering, fx: Any, x: Node, output_size: Any) -> Any:
    """Adaptive pooling: where every output size divides its input size the windows are equal (kernel =
    stride = in / out) and it is a window kernel; otherwise the windows vary in size and it stays a torch
    call (hybrid). The max form returns (values, indices); the indices are refused when used."""
    op, nd = _ADAPTIVE[fx.target]
    with_indices = op == "max"
    if with_indices and any(u.target is operator.getitem and u.args[1] == 1 and u.users for u in fx.users):
        raise UnsupportedError("adaptive max pooling with return_indices=True: only the pooled values are written")
    val = fx.meta["val"][0] if with_indices else fx.meta["val"]
    ins = x.shape[-nd:]
    outs = tuple(int(o) for o in val.shape[-nd:])
    if all(i % o == 0 for i, o in zip(ins, outs, strict=True)):
        k = tuple(i // o for i, o in zip(ins, outs, strict=True))
        extra = {} if op == "max" else {"count_include_pad": True, "divisor_override": None}
        out = window(lw, op, x, val, nd, k, k, 0, 1, False, **extra)
    else:
        out = lw.extern(f"F.adaptive_{op}_pool{nd}d({{0}}, {outs})", (x,), val, op=f"adaptive_{op}_pool")
    return (out, None) if with_indices else out


_UPSAMPLE = {aten.upsample_nearest1d.vec: ("nearest", 1), aten.upsample_nearest2d.vec: ("nearest", 2),
             aten.upsample_nearest3d.vec: ("nearest", 3), aten.upsample_linear1d.vec: ("linear", 1),
             aten.upsample_bilinear2d.vec: ("bilinear", 2), aten.upsample_trilinear3d.vec: ("trilinear", 3),
             aten.upsample_bicubic2d.vec: ("bicubic", 2)}


@_reg(*_UPSAMPLE)
def _upsample(lw: _Lowering, fx: Any, x: Node, output_size: Any, *rest: Any) -> Node:
    """``F.interpolate``: nearest by whole factors is a broadcast read (each input element repeated
    ``out / in`` times per dim: a view, fused into the kernel that reads it); other modes and fractional
    factors stay a torch call with the reference's arguments (hybrid)."""
    mode, nd = _UPSAMPLE[fx.target]
    val = fx.meta["val"]
    ins, outs = x.shape[-nd:], tuple(int(o) for o in val.shape[-nd:])
    scales = rest[-1] if rest else None
    whole = all(o % i == 0 for i, o in zip(ins, outs, strict=True)) and (
        scales is None or all(float(sc) == o // i for sc, i, o in zip(scales, ins, outs, strict=True)))
    if mode == "nearest" and whole:
        lead = x.shape[:-nd]
        y = lw.view(x, lead + tuple(v for i in ins for v in (i, 1)))
        y = lw.expand(y, lead + tuple(v for i, o in zip(ins, outs, strict=True) for v in (i, o // i)))
        return lw.view(y, tuple(val.shape))
    how = f"scale_factor={tuple(float(sc) for sc in scales)}" if scales is not None else f"size={outs}"
    corners = f", align_corners={bool(rest[0])}" if mode != "nearest" and rest and rest[0] is not None else ""
    return lw.extern(f"F.interpolate({{0}}, {how}, mode={mode!r}{corners})", (x,), val, op=f"interpolate_{mode}")


@_reg(aten.embedding.default)
def _embedding(lw: _Lowering, fx: Any, weight: Node, indices: Node, *_: Any) -> Node:
    """A lookup by an index tensor: a torch call (as indexing by a tensor is), the work after it in Triton."""
    return lw.extern("F.embedding({1}, {0})", (weight, indices), fx.meta["val"], op="embedding")


@_reg(aten.cumsum.default, aten.cumprod.default)
def _cumulative(lw: _Lowering, fx: Any, x: Node, dim: int, dtype: Any = None) -> Node:
    op = "sum" if fx.target is aten.cumsum.default else "prod"
    val = fx.meta["val"]
    if not val.dtype.is_floating_point:
        raise UnsupportedError(f"cum{op} with an integer result ({val.dtype}): only floating point scans are written")
    if not x.shape:
        raise UnsupportedError(f"cum{op} of a 0-d tensor")
    if x.dtype != val.dtype:
        x = lw.pw("cast", x, dtype=val.dtype)
    return lw.g.add(Node(SCAN, x.shape, val.dtype, args=(x,), op=op, dims=(dim % len(x.shape),)))


# -- constant fills and concatenation ------------------------------------------------------------
_FILL_VALUE = {aten.zeros_like.default: 0, aten.zeros.default: 0, aten.new_zeros.default: 0,
               aten.ones_like.default: 1, aten.ones.default: 1, aten.new_ones.default: 1}
_FILL_ARG = {aten.full.default: 1, aten.full_like.default: 1, aten.new_full.default: 2}  # position of the value


@_reg(*_FILL_VALUE, *_FILL_ARG)
def _fill(lw: _Lowering, fx: Any, *args: Any, **_: Any) -> Node:
    """A tensor filled with one scalar: a pointwise ``full`` node without arguments (nothing is read)."""
    val = fx.meta["val"]
    value = _FILL_VALUE[fx.target] if fx.target in _FILL_VALUE else args[_FILL_ARG[fx.target]]
    if isinstance(value, Node):
        raise UnsupportedError("a fill whose value is a tensor")
    if val.dtype.is_floating_point:
        value = float(value)
    elif val.dtype == torch.bool:
        value = bool(value)
    elif val.dtype in (torch.int64, torch.int32, torch.int8, torch.uint8):
        value = int(value)
    else:
        raise UnsupportedError(f"a constant fill of dtype {val.dtype}")
    return lw.g.add(Node(PW, tuple(val.shape), val.dtype, op="full", attrs={"value": value}))


@_reg(aten.cat.default)
def _cat(lw: _Lowering, fx: Any, tensors: Any, dim: int = 0) -> Node:
    """Concatenation along one dim: a pointwise ``cat`` node whose sources are read by index range
    (sources of another group are materialized first; fills are inlined). Empty sources are dropped."""
    val = fx.meta["val"]
    if not val.shape:
        raise UnsupportedError("torch.cat of 0-d tensors")
    dim %= len(val.shape)
    srcs = [t for t in tensors if t.numel > 0]
    if not srcs:
        raise UnsupportedError("torch.cat of empty tensors only")
    if any(len(t.shape) != len(val.shape) for t in srcs):
        raise UnsupportedError("torch.cat of tensors of different ranks")
    srcs = [t if t.dtype == val.dtype else lw.pw("cast", t, dtype=val.dtype) for t in srcs]
    if len(srcs) == 1:
        return srcs[0]
    if all(is_fill(t) and t.attrs["value"] == srcs[0].attrs["value"] for t in srcs):
        return lw.g.add(Node(PW, tuple(val.shape), val.dtype, op="full", attrs=dict(srcs[0].attrs)))
    return lw.g.add(Node(PW, tuple(val.shape), val.dtype, args=tuple(srcs), op="cat", attrs={"dim": dim}))


@_reg(torch.ops.tritonsmith_builtin.rnn.default)
def _rnn(lw: _Lowering, fx: Any, *args: Any) -> Any:
    """LSTM / GRU / RNN layers: one torch call each (``_rnn.py``), the work around them in Triton."""
    return lower_rnn(lw, fx, *args)


@_reg(aten.logical_not.default)
def _logical_not(lw: _Lowering, fx: Any, x: Node) -> Node:
    return lw.pw("eq", x, False if x.dtype == torch.bool else 0, dtype=torch.bool)


@_reg(aten.bitwise_not.default)
def _bitwise_not(lw: _Lowering, fx: Any, x: Node) -> Node:
    """``~mask`` of a boolean mask (a causal mask inverted); integer bit inversion is not written."""
    if x.dtype != torch.bool:
        raise UnsupportedError(f"bitwise not of a {x.dtype} tensor (only boolean masks are written)")
    return lw.pw("eq", x, False, dtype=torch.bool)


@_reg(aten.logical_and.default, aten.logical_or.default)
def _logical(lw: _Lowering, fx: Any, a: Node, b: Node) -> Node:
    a, b = (lw.pw("ne", t, False if t.dtype == torch.bool else 0, dtype=torch.bool) for t in (a, b))
    return lw.pw("mul" if fx.target is aten.logical_and.default else "maximum", a, b, dtype=torch.bool)


@_reg(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.dims, aten.all.default)
def _any_all(lw: _Lowering, fx: Any, x: Node, dim: Any = None, keepdim: bool = False) -> Node:
    """``any`` / ``all`` as a max / min of 0-or-1 values (the attention decomposition asks whether a row is
    fully masked)."""
    dims = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    ones = lw.pw("ne", x, False if x.dtype == torch.bool else 0, dtype=torch.bool)
    red = lw.reduce("max" if "any" in str(fx.target) else "min", lw.pw("cast", ones, dtype=torch.float32), dims, keepdim)
    return lw.pw("ne", red, 0.0, dtype=torch.bool)


@_reg(aten.constant_pad_nd.default)
def _pad(lw: _Lowering, fx: Any, x: Node, pad: Any, value: Any = 0) -> Node:
    """Constant padding as a concatenation with fills along each padded dim (negative pads slice)."""
    val = fx.meta["val"]
    out = x
    for i in range(len(pad) // 2):
        dim, lo, hi = len(x.shape) - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1])
        if lo < 0 or hi < 0:
            a, b = max(-lo, 0), out.shape[dim] - max(-hi, 0)
            shape = tuple(b - a if d == dim else s for d, s in enumerate(out.shape))
            cut = (slice(None),) * dim + (slice(a, b),)
            out = lw._view_like(out, shape, "slice", lambda t, cut=cut: t[cut], dim=dim, start=a, end=b, step=1)
        parts = []
        for size in (max(lo, 0), None, max(hi, 0)):
            if size is None:
                parts.append(out)
            elif size:
                shape = tuple(size if d == dim else s for d, s in enumerate(out.shape))
                fill = float(value) if val.dtype.is_floating_point else int(value)
                parts.append(lw.g.add(Node(PW, shape, val.dtype, op="full", attrs={"value": fill})))
        if len(parts) > 1:
            shape = tuple(sum(p.shape[dim] for p in parts) if d == dim else s for d, s in enumerate(out.shape))
            out = lw.g.add(Node(PW, shape, val.dtype, args=tuple(parts), op="cat", attrs={"dim": dim}))
    return out


@_reg(aten.index.Tensor)
def _index(lw: _Lowering, fx: Any, x: Node, indices: Any) -> Node:
    """Advanced indexing (a gather by index tensors, e.g. a relative-position bias table): a torch call."""
    nodes = [x, *[i for i in indices if i is not None]]
    if not all(isinstance(n, Node) for n in nodes):
        raise UnsupportedError("indexing with a non-tensor index")
    refs, k = [], 1
    for i in indices:
        if i is None:
            refs.append(":")
        else:
            refs.append(f"{{{k}}}")
            k += 1
    return lw.extern(f"{{0}}[{', '.join(refs)}]", tuple(nodes), fx.meta["val"], op="index")


@_reg(aten.as_strided.default)
def _as_strided(lw: _Lowering, fx: Any, x: Node, size: Any, stride: Any, storage_offset: Any = None) -> Node:
    """Only the re-striding of a contiguous value that changes nothing but the strides of size-1 dims
    (adaptive average pooling to 1 writes one)."""
    size = tuple(int(s) for s in size)
    want = contiguous_strides(size)
    same = all(s == w for s, w, n in zip(stride, want, size, strict=True) if n > 1)
    if not same or storage_offset not in (None, 0) or math.prod(size) != x.numel:
        raise UnsupportedError("as_strided (a strided view other than a reshape)")
    return lw.view(x, size)


@_reg(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(lw: _Lowering, fx: Any, *args: Any, **_: Any) -> Node:
    """``arange`` as an index node (``iota``), scaled and shifted."""
    val = fx.meta["val"]
    if fx.target is aten.arange.default:
        start, step = 0, 1
    else:
        start, step = args[0], (args[2] if len(args) > 2 else 1)
    if val.dtype.is_floating_point or not isinstance(start, int) or not isinstance(step, int):
        raise UnsupportedError("arange of floating-point values")
    out = lw.g.add(Node(PW, tuple(val.shape), val.dtype, op="iota", attrs={"dim": 0}))
    out = out if step == 1 else lw.pw("mul", out, step, dtype=val.dtype)
    return out if start == 0 else lw.pw("add", out, start, dtype=val.dtype)


@_reg(aten.fmod.Scalar)
def _fmod(lw: _Lowering, fx: Any, x: Node, m: Any) -> Node:
    if x.dtype.is_floating_point or not isinstance(m, int):
        raise UnsupportedError("fmod of floating-point values")
    return lw.pw("fmod", x, m, dtype=x.dtype)


@_reg(aten.index_select.default)
def _index_select(lw: _Lowering, fx: Any, x: Node, dim: int, index: Node) -> Node:
    """``torch.roll``'s decomposition, ``index_select(x, d, (arange(n) + s) % n)``, as a concatenation of two
    slices; any other index is a torch call."""
    dim %= len(x.shape)
    n = x.shape[dim]
    shift = _roll_shift(index, n)
    if shift is None:
        return lw.extern(f"torch.index_select({{0}}, {dim}, {{1}})", (x, index), fx.meta["val"], op="index_select")
    if shift == 0:
        return x
    parts = []
    for a, b in ((shift, n), (0, shift)):
        shape = tuple(b - a if d == dim else s for d, s in enumerate(x.shape))
        cut = (slice(None),) * dim + (slice(a, b),)
        parts.append(lw._view_like(x, shape, "slice", lambda t, cut=cut: t[cut], dim=dim, start=a, end=b, step=1))
    return lw.g.add(Node(PW, x.shape, x.dtype, args=tuple(parts), op="cat", attrs={"dim": dim}))


def _roll_shift(index: Node, n: int) -> int | None:
    """``s % n`` when ``index`` is ``(arange(n) + s) % n``, else None."""
    if index.kind != PW or index.op != "fmod" or index.args[1] != n or index.shape != (n,):
        return None
    inner = index.args[0]
    if isinstance(inner, Node) and inner.op == "iota":
        return 0
    if not isinstance(inner, Node) or inner.op != "add":
        return None
    a, b = inner.args
    if isinstance(a, Node) and a.op == "iota" and isinstance(b, int):
        return b % n
    if isinstance(b, Node) and b.op == "iota" and isinstance(a, int):
        return a % n
    return None
