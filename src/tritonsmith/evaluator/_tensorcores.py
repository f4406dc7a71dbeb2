"""What a GPU's tensor cores compute for ``tl.dot``, reproduced in Triton's interpreter.

The interpreter multiplies float32 operands exactly, whatever ``input_precision`` asks. On the GPU a
``tl.dot`` of float32 operands runs on the tensor cores in tf32 unless the kernel says otherwise (Triton's
default): the cores read the sign, the exponent and the top 10 of the 23 mantissa bits and drop the rest
(rounding toward zero), so one pass is about 1e-3 off. ``"tf32x3"`` rounds each operand to a tf32 high part,
keeps the remainder as a low part, and adds three passes (lo*hi + hi*lo, then hi*hi), which keeps float32
accuracy; ``"ieee"`` is float32 FMA. Without this, a kernel whose dot runs one-pass tf32 passes the float32
checks on the CPU and fails them on the GPU: the CPU's verdict would not be the GPU's.

Only float32 x float32 dots change; fp16/bf16/fp8/integer operands are computed as the interpreter does.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

__all__ = ["emulate_tensor_cores", "one_pass_tf32_dots"]

log = logging.getLogger(__name__)

_MARK = "_tritonsmith_tensor_cores"
_calls = {"one_pass_tf32": 0}


def one_pass_tf32_dots() -> int:
    """How many float32 ``tl.dot`` calls ran one-pass tf32 in this process since the emulation began."""
    return _calls["one_pass_tf32"]


def _tf32(x: np.ndarray, *, nearest: bool = False) -> np.ndarray:
    """``x`` cut to tf32's 10 mantissa bits (inf and NaN kept as they are): dropped, as the cores read a float32,
    or ``nearest`` (``cvt.rna.tf32.f32``, tf32x3's high part)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    cut = ((bits + np.uint32(0x1000)) if nearest else bits) & np.uint32(0xFFFFE000)
    return np.where(special, bits, cut).view(np.float32)


def tensor_core_dot(a: np.ndarray, b: np.ndarray, acc: np.ndarray, precision: str) -> np.ndarray:
    """``acc + a @ b`` for float32 ``a``, ``b`` as the tensor cores compute it at ``precision``
    ("tf32", "tf32x3" or "ieee"), accumulated in float32."""
    def mm(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 is NaN here as on the GPU, silently
            return np.matmul(x, y, dtype=np.float32)

    if precision == "tf32":
        return mm(_tf32(a), _tf32(b)) + acc
    if precision == "tf32x3":
        a_hi, b_hi = _tf32(a, nearest=True), _tf32(b, nearest=True)
        with np.errstate(invalid="ignore", over="ignore"):
            a_lo, b_lo = _tf32(a - a_hi), _tf32(b - b_hi)
        small = mm(a_lo, b_hi) + mm(a_hi, b_lo)
        # Triton zeroes a NaN correction (inf - inf in the split) so that inf operands still give inf
        small = np.where(np.isnan(small), np.float32(0), small)
        return mm(a_hi, b_hi) + (small + acc)  # hi is exact in tf32
    return mm(a, b) + acc


def emulate_tensor_cores() -> bool:
    """Make the interpreter's ``tl.dot`` on float32 operands compute what the GPU's tensor cores do, and count
    one-pass tf32 dots (:func:`one_pass_tf32_dots`). Idempotent; False (logged) where this Triton's interpreter
    has no ``create_dot`` of the known form, in which case dots stay exact."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    original = getattr(builder, "create_dot", None)
    if original is None:
        log.warning("this Triton's interpreter has no InterpreterBuilder.create_dot: tl.dot stays exact on the CPU, "
                    "so a one-pass tf32 dot is only caught on a GPU")
        return False
    if getattr(original, _MARK, False):
        return True

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        precision = getattr(input_precision, "name", str(input_precision)).lower()
        if a.data.dtype != np.float32 or b.data.dtype != np.float32 or precision not in ("tf32", "tf32x3"):
            return original(self, a, b, d, input_precision, max_num_imprecise_acc)
        if precision == "tf32":
            _calls["one_pass_tf32"] += 1
        data = tensor_core_dot(a.data, b.data, d.data.astype(np.float32), precision)
        return interpreter.TensorHandle(data.astype(d.data.dtype), d.dtype.scalar)

    setattr(create_dot, _MARK, True)
    builder.create_dot = create_dot
    return True
