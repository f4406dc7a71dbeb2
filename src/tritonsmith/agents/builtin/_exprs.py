"""Triton expressions for pointwise ops and index arithmetic (all math in fp32)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from tritonsmith.agents.builtin._ir import Node, UnsupportedError

TL_DTYPE = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
            torch.float64: "tl.float64", torch.int64: "tl.int64", torch.int32: "tl.int32", torch.bool: "tl.int1",
            torch.int8: "tl.int8", torch.uint8: "tl.uint8"}

# Helpers the emitted module defines once when a kernel uses them.
HELPERS = {
    "_tanh": '''@triton.jit
def _tanh(x):
    """tanh(x) = 1 - 2 / (exp(2x) + 1); saturates to +-1 without overflow."""
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)
''',
    "_sigmoid": '''@triton.jit
def _sigmoid(x):
    """sigmoid(x) = 1 / (1 + exp(-x))."""
    return 1.0 / (1.0 + tl.exp(-x))
''',
    "_tf32_split_kernel": '''@triton.jit
def _tf32_split_kernel(x_ptr, out_ptr, OFF: tl.constexpr, SB: tl.constexpr, SR: tl.constexpr, SC: tl.constexpr,
                       R: tl.constexpr, C: tl.constexpr, RP: tl.constexpr, CP: tl.constexpr, ROWS: tl.constexpr,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Split fp32 x[b, r, c] (strides SB, SR, SC from element OFF) for 3xTF32: hi = x rounded to tf32 (10-bit
    mantissa, nearest), lo = x - hi (exact in fp32), so hi + lo == x and a tf32 tensor-core product of lo loses at
    most 2^-11 |lo| <= 2^-22 |x|. Writes a zero-padded contiguous out[b] of RP x CP per part: ROWS=True stacks
    [hi; lo] (2*RP x CP), ROWS=False puts them side by side [hi | lo] (RP x 2*CP)."""
    b = tl.program_id(2).to(tl.int64)
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    x = tl.load(x_ptr + OFF + b * SB + r * SR + c * SC, mask=(r < R) & (c < C), other=0.0).to(tl.float32)
    bits = x.to(tl.int32, bitcast=True)
    hi = ((bits + 4096) & -8192).to(tl.float32, bitcast=True)  # round the 13 low mantissa bits away
    lo = x - hi
    inside = (r < RP) & (c < CP)
    if ROWS:
        dst = out_ptr + b * (2 * RP * CP) + r * CP + c
        tl.store(dst, hi, mask=inside)
        tl.store(dst + RP * CP, lo, mask=inside)
    else:
        dst = out_ptr + b * (2 * RP * CP) + r * (2 * CP) + c
        tl.store(dst, hi, mask=inside)
        tl.store(dst + CP, lo, mask=inside)
''',
    "_pad_copy_kernel": '''@triton.jit
def _pad_copy_kernel(x_ptr, out_ptr, OFF: tl.constexpr, SB: tl.constexpr, SR: tl.constexpr, SC: tl.constexpr,
                     R: tl.constexpr, C: tl.constexpr, RP: tl.constexpr, CP: tl.constexpr,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """out[b, r, c] = x[b, r, c] (strides SB, SR, SC from element OFF) for r < R, c < C; 0 elsewhere in the
    contiguous RP x CP block of batch b. RP and CP are tile multiples: the matmul then reads whole tiles
    from rows that start on 16-element boundaries (16-byte copies, no K masks) instead of 4-byte pieces."""
    b = tl.program_id(2).to(tl.int64)
    r = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]).to(tl.int64)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    x = tl.load(x_ptr + OFF + b * SB + r * SR + c * SC, mask=(r < R) & (c < C), other=0.0)
    tl.store(out_ptr + b * (RP * CP) + r * CP + c, x, mask=(r < RP) & (c < CP))
''',
    "_gelu_tanh": '''@triton.jit
def _gelu_tanh(x):
    """gelu(x) ~= 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0))
''',
}


def _rows_at_run_time(name: str) -> str:
    """Staging helper ``name`` with its row count ``R`` and padded row count ``RP`` as run-time arguments (the
    first after the pointers): a shape-generic matmul whose M follows the leading size stages A with it."""
    text = HELPERS[name]
    sig = f"def {name}(x_ptr, out_ptr, "
    fixed = "R: tl.constexpr, C: tl.constexpr, RP: tl.constexpr, CP: tl.constexpr"
    assert sig in text and fixed in text
    rows = name.replace("_kernel", "_rows_kernel")
    return text.replace(sig, f"def {rows}(x_ptr, out_ptr, R, RP, ").replace(fixed, "C: tl.constexpr, CP: tl.constexpr")


HELPERS["_pad_copy_rows_kernel"] = _rows_at_run_time("_pad_copy_kernel")
HELPERS["_tf32_split_rows_kernel"] = _rows_at_run_time("_tf32_split_kernel")


def literal(v: Any, as_float: bool) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float) and math.isinf(v):
        return "float('inf')" if v > 0 else "-float('inf')"
    if as_float:
        return repr(float(v))
    return repr(int(v)) if isinstance(v, int) else repr(v)


def pw_expr(n: Node, args: list[str], helpers: set[str], index_of: dict[str, str]) -> str:
    """The Triton expression of pointwise node ``n`` over argument expressions ``args``."""
    op, a = n.op, args
    simple = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
              "minimum": "tl.minimum({0}, {1})", "maximum": "tl.maximum({0}, {1})", "neg": "(-{0})",
              "exp": "tl.exp({0})", "log": "tl.log({0})", "log1p": "tl.log(1.0 + {0})", "abs": "tl.abs({0})",
              "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})", "relu": "tl.maximum({0}, 0.0)",
              "expm1": "(tl.exp({0}) - 1.0)", "erf": "tl.math.erf({0})", "reciprocal": "(1.0 / {0})",
              "gelu": "(0.5 * {0} * (1.0 + tl.math.erf({0} * 0.7071067811865476)))",
              "gt": "({0} > {1})", "lt": "({0} < {1})", "ge": "({0} >= {1})", "le": "({0} <= {1})",
              "eq": "({0} == {1})", "ne": "({0} != {1})", "where": "tl.where({0}, {1}, {2})",
              "fmod": "({0} % {1})",  # integers only: Triton's % truncates like C, as torch.fmod does
              "sign": "tl.where({0} > 0, 1.0, tl.where({0} < 0, -1.0, 0.0))"}
    if op in simple:
        return simple[op].format(*a)
    if op in ("tanh", "sigmoid", "gelu_tanh"):
        helpers.add("_" + op)
        return f"_{op}({a[0]})"
    if op == "clamp":
        x = a[0]
        if n.attrs.get("lo") is not None:
            x = f"tl.maximum({x}, {literal(n.attrs['lo'], True)})"
        if n.attrs.get("hi") is not None:
            x = f"tl.minimum({x}, {literal(n.attrs['hi'], True)})"
        return x
    if op == "leaky_relu":
        return f"tl.where({a[0]} > 0, {a[0]}, {a[0]} * {literal(n.attrs['slope'], True)})"
    if op == "elu":
        s, al, i = (literal(n.attrs[k], True) for k in ("scale", "alpha", "input_scale"))
        return f"tl.where({a[0]} > 0, {s} * {a[0]}, {s} * {al} * (tl.exp({a[0]} * {i}) - 1.0))"
    if op == "cast":
        return f"{a[0]}.to({TL_DTYPE[n.dtype]})"
    if op == "iota":
        dim = n.attrs["dim"]
        inner = 1
        for s in n.shape[dim + 1:]:
            inner *= s
        idx = index_of["idx"]
        q = idx if inner == 1 else f"({idx} // {inner})"
        return f"({q} % {n.shape[dim]})"
    raise UnsupportedError(f"no Triton expression for pointwise op {op}")


def broadcast_strides(shape: tuple[int, ...], strides: tuple[int, ...], use: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a tensor of ``shape`` broadcast to ``use`` (0 along broadcast dimensions)."""
    pad = len(use) - len(shape)
    out = []
    for i in range(len(use)):
        j = i - pad
        out.append(0 if j < 0 or shape[j] == 1 else strides[j])
    return tuple(out)


@dataclass(frozen=True)
class Digits:
    """A row kernel's element index ``lin`` as the mixed-radix number it is: ``lin = sum(coord * stride)`` over
    the domain's runs of kept and reduced dimensions, whose coordinates the kernel already has (``k``, ``r``
    or a quotient/remainder of them). ``(lin // lo) % size`` is then written from those coordinates instead of
    dividing ``lin`` again per element (a concatenation's channel index is the row ``k`` itself)."""

    runs: tuple[tuple[int, int, str, bool], ...]  # (size, stride, coordinate text, of the kept runs), inner first
    top_fixed: bool = True  # False: the outermost run's size follows the leading size (never taken modulo)

    def of(self, lo: int, size: int | None) -> tuple[str, bool] | None:
        """``(lin // lo) % size`` (``size`` None: ``lin // lo``) as text, and whether it depends on the row only;
        None where a bound falls between digits (the caller divides ``lin``)."""
        top_size, top_stride = self.runs[-1][0], self.runs[-1][1]
        hi = None if size is None or lo * size >= top_size * top_stride else lo * size
        if hi is not None and hi > top_stride and not self.top_fixed:
            return None  # a remainder inside a run whose size is known only at run time
        terms, row_only = [], True
        for n, st, coord, kept in self.runs:
            a, b = max(lo, st), st * n if hi is None else min(hi, st * n)
            if a >= b:
                continue
            m = a // st  # the run's coordinate holds this digit from place m (in the run's own units) to b
            if a % st or a % lo or n % m or (b < st * n and (b % st or b % a or (st * n) % b)):
                return None
            t = coord if m == 1 else f"({coord} // {m})"
            if b < st * n:
                t = f"({t} % {b // a})"
            terms.append(t if a == lo else f"{t} * {a // lo}")
            row_only = row_only and kept
        if not terms:
            return "0", True
        return (terms[0] if len(terms) == 1 else "(" + " + ".join(reversed(terms)) + ")"), row_only


def offset_expr(idx: str, use: tuple[int, ...], strides: tuple[int, ...], base: int,
                digits: Digits | None = None) -> str:
    """Element offset of row-major index ``idx`` of shape ``use`` in a tensor with ``strides`` (``digits``: the
    index's coordinates, where ``idx`` is a row kernel's ``lin``)."""
    merged: list[list[int]] = []
    for s, st in zip(use, strides, strict=True):
        if s == 1:
            continue
        if merged and merged[-1][1] == st * s:
            merged[-1] = [merged[-1][0] * s, st]
        else:
            merged.append([s, st])
    terms, inner = [], 1
    for i in range(len(merged) - 1, -1, -1):
        s, st = merged[i]
        if st != 0:
            # the whole index (no division) stays itself: lin is computed anyway
            got = digits.of(inner, None if i == 0 else s) if digits is not None and (inner, i) != (1, 0) else None
            if got is not None:
                t = got[0]
            else:
                q = idx if inner == 1 else f"({idx} // {inner})"
                t = q if i == 0 else f"({q} % {s})"
            terms.append(t if st == 1 else f"{t} * {st}")
        inner *= s
    if base:
        terms.append(str(base))
    return " + ".join(reversed(terms)) if terms else "0"


def offset_text(idx: str, use: tuple[int | str, ...], strides: tuple[int | str, ...], base: int | str) -> str:
    """``offset_expr`` where some sizes or strides are kernel text (a leading size a view moved off the first
    dimension: ``lead * 4``); no dimensions are merged, sizes of 1 are skipped."""
    dims = [i for i, s in enumerate(use) if s != 1]
    terms: list[str] = []
    inner: list[int | str] = []
    for i in reversed(dims):
        size, st = use[i], strides[i]
        if st != 0:
            div = _product(inner)
            q = idx if div == "1" else f"({idx} // {div})"
            t = q if i == dims[0] else f"({q} % {_group(size)})"
            terms.append(t if st == 1 else f"{t} * {_group(st)}")
        inner.append(size)
    if base:
        terms.append(str(base))
    return " + ".join(reversed(terms)) if terms else "0"


def _product(factors: list[int | str]) -> str:
    """The product of sizes as kernel text: the literal factors multiplied out, the text ones kept."""
    n = 1
    texts = []
    for f in factors:
        if isinstance(f, int):
            n *= f
        else:
            texts.append(_group(f))
    parts = ([str(n)] if n != 1 else []) + texts
    if not parts:
        return "1"
    return parts[0] if len(parts) == 1 else "(" + " * ".join(parts) + ")"


def _group(x: int | str) -> str:
    return str(x) if isinstance(x, int) or x.isidentifier() else f"({x})"
