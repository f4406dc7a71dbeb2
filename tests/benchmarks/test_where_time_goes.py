"""benchmarks/where_time_goes_gpu.py: kernel kinds, the per-call summary, and a whole run on the CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.benchmarks._scripts import BENCHMARKS, load_script
from tritonsmith.examples import example_path

wtg = load_script("where_time_goes_gpu")


@pytest.mark.parametrize("name, kind", [
    ("void cudnn::cnn::conv2d_grouped_direct_kernel<float>", "conv"),
    ("sm90_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw", "conv"),
    ("void nchwToNhwcKernel<float, float, float, true, false>", "layout"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", "gemm"),
    ("triton_red_fused__native_batch_norm_legit_functional_0", "triton"),
    ("_row_3_kernel", "triton"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "other"),
])
def test_kernel_kinds(name: str, kind: str):
    assert wtg.kind(name) == kind


def test_summary_adds_per_kind_and_orders_the_largest_first():
    s = wtg.summary({"_a_kernel": (0.5, 2.0), "cudnn_conv": (1.5, 1.0), "_b_kernel": (0.25, 1.0)})
    assert s["total_ms"] == pytest.approx(2.25) and s["launches"] == pytest.approx(4.0)
    assert s["by_kind"]["triton"] == {"ms": pytest.approx(0.75), "launches": pytest.approx(3.0)}
    assert [t["name"] for t in s["top"]] == ["cudnn_conv", "_a_kernel", "_b_kernel"]


def _run(tmp_path, pairs: str) -> tuple[str, str]:
    """The script as it is used: its own process, the interpreter on (set before any kernel is defined)."""
    out = tmp_path / "w.json"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "where_time_goes_gpu.py"), "--device", "cpu", "--json",
                           str(out), pairs], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, out.read_text()


def test_a_run_on_the_cpu_labels_each_candidate_by_its_variant(tmp_path):
    cand = tmp_path / "softmax__v2.py"
    shutil.copy(example_path("softmax_triton.py"), cand)
    text, saved = _run(tmp_path, f"{example_path('softmax_reference.py')}={cand}")
    assert "| v2 |" in text and "| eager |" in text and "| compile |" in text
    assert json.loads(saved)[0]["labels"] == ["eager", "compile", "v2"]


def test_a_broken_candidate_is_reported_and_the_others_still_profiled(tmp_path):
    good, bad = tmp_path / "softmax__good.py", tmp_path / "softmax__bad.py"
    shutil.copy(example_path("softmax_triton.py"), good)
    bad.write_text("raise ImportError('no such kernel')\n")
    text, saved = _run(tmp_path, f"{example_path('softmax_reference.py')}={bad},{good}")
    assert "| good |" in text and "| bad | failed: RuntimeError: softmax__bad.py did not load: ImportError" in text
    assert json.loads(saved)[0]["labels"] == ["eager", "compile", "good"]
