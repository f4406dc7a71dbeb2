"""The interpreter's tl.dot made to compute what a GPU's tensor cores do (``evaluator._tensorcores``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tritonsmith.evaluator._tensorcores import tensor_core_dot


def _rel(x: np.ndarray, exact: np.ndarray) -> float:
    return float(np.linalg.norm(x.astype(np.float64) - exact) / np.linalg.norm(exact))


@pytest.mark.parametrize("k", [7, 96, 1031])
def test_one_pass_tf32_loses_about_1e_3_and_tf32x3_keeps_float32(k: int) -> None:
    rng = np.random.default_rng(k)
    a = rng.standard_normal((37, k)).astype(np.float32)
    b = rng.random((k, 29)).astype(np.float32)  # positive: truncation's bias shows
    exact = a.astype(np.float64) @ b.astype(np.float64)
    zero = np.zeros((37, 29), np.float32)
    fp32 = _rel(np.matmul(a, b), exact)
    assert 1e-4 < _rel(tensor_core_dot(a, b, zero, "tf32"), exact) < 3e-3
    assert _rel(tensor_core_dot(a, b, zero, "tf32x3"), exact) < 8 * max(fp32, 1e-7)
    assert _rel(tensor_core_dot(a, b, zero, "ieee"), exact) < 8 * max(fp32, 1e-7)


def test_the_cores_truncate_and_keep_exact_tf32_operands_and_specials() -> None:
    """Operands already exact in tf32 (10 mantissa bits) multiply exactly in one pass, which is what a
    pre-split hi/lo kernel relies on; inf and NaN pass through; the accumulator is added."""
    a = np.array([[1.0 + 2.0 ** -10, 3.0, np.inf]], np.float32)
    b = np.array([[2.0], [0.5], [0.0]], np.float32)
    acc = np.array([[0.25]], np.float32)
    assert np.isnan(tensor_core_dot(a, b, acc, "tf32")[0, 0])  # inf * 0, as on the GPU
    a, b = a[:, :2], b[:2]
    assert tensor_core_dot(a, b, acc, "tf32")[0, 0] == np.float32((1 + 2.0 ** -10) * 2 + 1.5 + 0.25)
    below = np.array([[1.0 + 2.0 ** -12]], np.float32)  # under the 10th bit: the cores drop it
    assert tensor_core_dot(below, np.ones((1, 1), np.float32), np.zeros((1, 1), np.float32), "tf32")[0, 0] == 1.0
    negative = np.array([[-(1.0 + 3 * 2.0 ** -12)]], np.float32)  # toward zero, not to nearest
    assert tensor_core_dot(negative, np.ones((1, 1), np.float32), np.zeros((1, 1), np.float32), "tf32")[0, 0] == -1.0
    big = np.array([[np.inf, 1.0]], np.float32)
    assert tensor_core_dot(big, np.ones((2, 1), np.float32), np.zeros((1, 1), np.float32), "tf32x3")[0, 0] == np.inf


_KERNEL = textwrap.dedent('''
    import os
    os.environ["TRITON_INTERPRET"] = "1"
    import numpy as np, torch, triton, triton.language as tl
    from tritonsmith.evaluator._tensorcores import emulate_tensor_cores, one_pass_tf32_dots

    @triton.jit
    def _dot_kernel(a_ptr, b_ptr, c_ptr, HALF: tl.constexpr, P: tl.constexpr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
        if HALF:
            c = tl.dot(a.to(tl.float16), b.to(tl.float16))
        elif P == "default":
            c = tl.dot(a, b)
        else:
            c = tl.dot(a, b, input_precision=P)
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], c)

    torch.manual_seed(0)
    a, b, c = torch.randn(16, 16), torch.rand(16, 16), torch.empty(16, 16)
    exact = (a.double() @ b.double())
    def err(half, p):
        _dot_kernel[(1,)](a, b, c, HALF=half, P=p)
        return float((c.double() - exact).norm() / exact.norm())
    before = {p: err(False, p) for p in ("default", "tf32", "tf32x3", "ieee")}
    assert emulate_tensor_cores() and emulate_tensor_cores()  # idempotent
    after = {p: err(False, p) for p in ("default", "tf32", "tf32x3", "ieee")}
    half_before = one_pass_tf32_dots()
    half = err(True, "default")
    print(before, after, half, half_before, one_pass_tf32_dots())
    assert max(before.values()) < 1e-6  # the interpreter alone multiplies exactly, whatever was asked
    assert after["default"] > 1e-4 and after["tf32"] > 1e-4 and after["default"] == after["tf32"]
    assert after["tf32x3"] < 1e-6 and after["ieee"] < 1e-6
    assert half_before == 2 and one_pass_tf32_dots() == 2 and half > 1e-4  # fp16 operands: not counted as tf32
''')


def test_the_interpreter_computes_what_the_cores_do_once_emulated() -> None:
    """In a fresh interpreter process: exact before; after, one-pass tf32 (the default on float32 operands and
    when asked) is ~1e-3 off and counted, tf32x3 and ieee stay float32-accurate, fp16 operands are untouched."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _KERNEL], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


_GPU_DOT = textwrap.dedent('''
    import json, sys
    import numpy as np, torch, triton, triton.language as tl
    from tritonsmith.evaluator._tensorcores import tensor_core_dot

    @triton.jit
    def _dot_kernel(a_ptr, b_ptr, c_ptr, K, P: tl.constexpr):
        r = tl.arange(0, 64)
        acc = tl.zeros([64, 64], tl.float32)
        for k0 in range(0, K, 32):
            rk = k0 + tl.arange(0, 32)
            a = tl.load(a_ptr + r[:, None] * K + rk[None, :])
            b = tl.load(b_ptr + rk[:, None] * 64 + r[None, :])
            acc = tl.dot(a, b, acc, input_precision=P)
        tl.store(c_ptr + r[:, None] * 64 + r[None, :], acc)

    torch.manual_seed(0)
    out = {}
    for k in (32, 1024):
        a, b = torch.rand(64, k, device="cuda"), torch.randn(k, 64, device="cuda")
        exact = a.double() @ b.double()
        for p in ("tf32", "tf32x3"):
            c = torch.empty(64, 64, device="cuda")
            _dot_kernel[(1,)](a, b, c, k, P=p)
            emu = torch.from_numpy(tensor_core_dot(a.cpu().numpy(), b.cpu().numpy(), np.zeros((64, 64), np.float32), p))
            rel = lambda x, y: float((x.double().cpu() - y.double().cpu()).norm() / y.double().cpu().norm())
            out[f"{p}/{k}"] = {"gpu_vs_exact": rel(c, exact), "emulated_vs_exact": rel(emu, exact),
                               "gpu_vs_emulated": rel(c, emu)}
    print(json.dumps(out))
''')


@pytest.mark.gpu
def test_the_emulation_matches_the_tensor_cores_of_this_gpu(tmp_path: Path) -> None:
    """What the interpreter is made to compute is what the GPU computes: the same error against float64 for
    one-pass tf32 and tf32x3, and the two results within float32 summation-order noise of each other (rounding
    to nearest instead of the cores' truncation would put them ~5e-4 apart on these inputs)."""
    import json

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = tmp_path / "gpu_dot.py"  # a compiled @triton.jit needs its source in a file (python -c has none)
    script.write_text(_GPU_DOT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(out)
    for key, e in out.items():
        assert e["gpu_vs_emulated"] < 2e-5, (key, e)
        if key.startswith("tf32/"):
            assert 0.5 < e["gpu_vs_exact"] / e["emulated_vs_exact"] < 2.0, (key, e)
            assert e["gpu_vs_exact"] > 1e-4, (key, e)
        else:
            assert e["gpu_vs_exact"] < 1e-5 and e["emulated_vs_exact"] < 1e-5, (key, e)
