"""Speed-of-light counting and ceilings: exact numbers on small problems written here."""

from __future__ import annotations

import json

import pytest

from tritonsmith.core.problem import Problem
from tritonsmith.profiler._sol import (
    DeviceCeilings,
    ceilings_for,
    datasheet_ceilings,
    load_cached_ceilings,
    speed_of_light,
    store_ceilings,
    work_count,
)

MATMUL = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)
M, K, N = 37, 53, 29
def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]
def get_init_inputs():
    return []
"""

LINEAR_RELU_HALF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.fc = nn.Linear(i, o, dtype=torch.bfloat16)
    def forward(self, x):
        return torch.relu(self.fc(x))
def get_inputs():
    return [torch.rand(19, 45, dtype=torch.bfloat16)]
def get_init_inputs():
    return [45, 23]
"""

ELEMENTWISE = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x, y):
        return torch.sigmoid(x) * y, x + 1
def get_inputs():
    return [torch.rand(7, 131), torch.rand(7, 131)]
def get_init_inputs():
    return []
"""

CONV = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, bias=False)
    def forward(self, x):
        return self.conv(x)
def get_inputs():
    return [torch.rand(2, 3, 11, 13)]
def get_init_inputs():
    return []
"""

H200 = datasheet_ceilings("NVIDIA H200")


def test_matmul_flops_and_bytes_are_exact() -> None:
    work = work_count(Problem.from_source(MATMUL).inspect())
    assert work.flops == 2 * 37 * 53 * 29
    assert work.input_bytes == 4 * (37 * 53 + 53 * 29)
    assert work.output_bytes == 4 * 37 * 29
    assert work.parameter_bytes == 0
    assert work.min_bytes == 4 * (37 * 53 + 53 * 29 + 37 * 29)
    assert work.dtype == "float32"


def test_linear_counts_parameters_and_uses_the_data_dtype() -> None:
    work = work_count(Problem.from_source(LINEAR_RELU_HALF).inspect())
    assert work.flops == 2 * 19 * 45 * 23
    assert work.input_bytes == 2 * 19 * 45
    assert work.output_bytes == 2 * 19 * 23
    assert work.parameter_bytes == 2 * (45 * 23 + 23)
    assert work.dtype == "bfloat16"
    sol = speed_of_light(work, H200)  # type: ignore[arg-type]
    assert sol.math_mode == "bf16"
    assert sol.compute_floor_ms == pytest.approx(2 * 19 * 45 * 23 / 989.4e12 * 1e3)


def test_elementwise_has_no_tensor_core_flops_and_two_outputs() -> None:
    work = work_count(Problem.from_source(ELEMENTWISE).inspect())
    assert work.flops == 0
    assert work.input_bytes == 2 * 4 * 7 * 131
    assert work.output_bytes == 2 * 4 * 7 * 131
    assert work.arithmetic_intensity == 0.0


def test_conv_flops() -> None:
    work = work_count(Problem.from_source(CONV).inspect())
    assert work.flops == 2 * 2 * 5 * 9 * 11 * 3 * 3 * 3  # 2 * N * Cout * Hout * Wout * Cin * kh * kw
    assert work.parameter_bytes == 4 * 5 * 3 * 3 * 3


def test_floor_and_bound_on_the_h200_datasheet() -> None:
    assert H200 is not None and H200.source == "datasheet"
    mm = speed_of_light(work_count(Problem.from_source(MATMUL).inspect()), H200)
    bytes_ = 4 * (37 * 53 + 53 * 29 + 37 * 29)
    assert mm.memory_floor_ms == pytest.approx(bytes_ / 4800e9 * 1e3)
    assert mm.compute_floor_ms == pytest.approx(2 * 37 * 53 * 29 / 494.7e12 * 1e3)
    assert mm.math_mode == "tf32"
    assert mm.ridge_point == pytest.approx(494.7e12 / 4800e9)
    assert mm.bound == "memory"  # 9.4 FLOP/byte, far below the ridge of 103
    assert mm.percent(2 * mm.floor_ms) == pytest.approx(50.0)
    assert mm.percent(None) is None


def test_big_matmul_is_compute_bound() -> None:
    big = Problem.from_source(MATMUL.replace("37, 53, 29", "4096, 4096, 4096"))
    sol = speed_of_light(work_count(big.inspect()), H200)  # type: ignore[arg-type]
    assert sol.bound == "compute"
    assert sol.floor_ms == pytest.approx(2 * 4096**3 / 494.7e12 * 1e3)


def test_datasheet_lookup() -> None:
    h100 = datasheet_ceilings("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.bandwidth_gbs == 3350.0
    pcie = datasheet_ceilings("NVIDIA H100 PCIe")
    assert pcie is not None and pcie.bandwidth_gbs == 2000.0
    assert datasheet_ceilings("NVIDIA GeForce RTX 3090") is None


def test_ceilings_cache_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRITONSMITH_CACHE_DIR", str(tmp_path))
    assert load_cached_ceilings("Fake GPU") is None
    assert ceilings_for("Fake GPU") is None
    measured = DeviceCeilings(device_name="Fake GPU", bandwidth_gbs=1234.5, matmul_tflops={"tf32": 111.0, "fp16": 222.0},
                              source="measured", measured_at="2026-01-01T00:00:00+00:00")
    path = store_ceilings(measured)
    assert path.parent == tmp_path
    assert json.loads(path.read_text())["Fake GPU"]["bandwidth_gbs"] == 1234.5
    assert ceilings_for("Fake GPU") == measured
    # a cached measurement wins over the datasheet for a known name
    store_ceilings(DeviceCeilings(device_name="NVIDIA H200", bandwidth_gbs=4100.0, matmul_tflops={"tf32": 400.0},
                                  source="measured"))
    assert ceilings_for("NVIDIA H200").bandwidth_gbs == 4100.0  # type: ignore[union-attr]
    assert load_cached_ceilings("Fake GPU") == measured


def test_corrupt_cache_is_ignored(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRITONSMITH_CACHE_DIR", str(tmp_path))
    (tmp_path / "ceilings.json").write_text("{not json")
    assert ceilings_for("NVIDIA H200").source == "datasheet"  # type: ignore[union-attr]
