"""Ahead-of-time compile facts for sm_90 without a GPU (real Triton compilation, ptxas and cuobjdump)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import ModuleType

import pytest

triton = pytest.importorskip("triton")

from tritonsmith.core.modload import import_file  # noqa: E402
from tritonsmith.profiler._aot import _cuobjdump, compile_kernel, parse_resource_usage  # noqa: E402

pytestmark = pytest.mark.skipif(_cuobjdump() is None, reason="Triton's NVIDIA backend tools are not installed")

KERNELS = textwrap.dedent('''
    import triton
    import triton.language as tl

    @triton.jit
    def _scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)

    @triton.jit
    def _tile_dot_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b))

    @triton.jit
    def _bad_kernel(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)  # BLOCK must be a power of two
        tl.store(x_ptr + offs, offs)
''')


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    path = Path(tmp_path_factory.mktemp("aot")) / "aot_kernels.py"
    path.write_text(KERNELS)
    mp = pytest.MonkeyPatch()
    mp.delenv("TRITON_INTERPRET", raising=False)  # compiled kernels, not the interpreter's
    try:
        return import_file(path, "_tritonsmith_test_aot_kernels")
    finally:
        mp.undo()


def test_elementwise_kernel_facts(kernels: ModuleType) -> None:
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "alpha": "fp32", "BLOCK": "constexpr"}
    facts = compile_kernel(kernels._scale_kernel, sig, {"BLOCK": 1024}, num_warps=8, num_stages=2)
    assert facts.error is None
    assert facts.target == "sm_90" and facts.source == "aot"
    assert facts.num_warps == 8 and facts.num_stages == 2
    assert facts.registers is not None and 8 <= facts.registers <= 64
    assert facts.spills == 0 and facts.local_bytes == 0
    assert facts.shared_bytes == 0
    assert facts.constexprs == {"BLOCK": "1024"}


def test_dot_kernel_uses_shared_memory_and_more_registers(kernels: ModuleType) -> None:
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    facts = compile_kernel(kernels._tile_dot_kernel, sig, {"BM": 64, "BN": 64, "BK": 32}, num_warps=4)
    assert facts.error is None
    assert facts.shared_bytes is not None and facts.shared_bytes > 0
    small = compile_kernel(kernels._scale_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "alpha": "fp32",
                                                   "BLOCK": "constexpr"}, {"BLOCK": 128}, num_warps=4)
    assert facts.registers is not None and small.registers is not None and facts.registers > small.registers


def test_compile_error_is_reported_in_the_facts(kernels: ModuleType) -> None:
    facts = compile_kernel(kernels._bad_kernel, {"x_ptr": "*i32", "BLOCK": "constexpr"}, {"BLOCK": 100})
    assert facts.error is not None and "power of 2" in facts.error.lower().replace("power-of-two", "power of 2")
    assert facts.registers is None


def test_older_architecture_target(kernels: ModuleType) -> None:
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "alpha": "fp32", "BLOCK": "constexpr"}
    facts = compile_kernel(kernels._scale_kernel, sig, {"BLOCK": 256}, arch=80)
    assert facts.error is None and facts.target == "sm_80" and facts.registers


def test_parse_resource_usage_reads_spills_from_the_stack_frame() -> None:
    text = ("\nResource usage:\n Common:\n  GLOBAL:0\n Function other:\n  REG:40 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:576"
            "\n Function mm_kernel:\n  REG:255 STACK:14800 SHARED:1024 LOCAL:16 CONSTANT[0]:592 TEXTURE:0\n")
    assert parse_resource_usage(text, "mm_kernel") == (255, 14816)
    assert parse_resource_usage(text, "other") == (40, 0)
    assert parse_resource_usage("nothing here", "mm_kernel") == (None, None)
