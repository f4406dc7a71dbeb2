"""Problem loading: every way in, the clear errors, inspection on the meta device and scaling."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tritonsmith.core.problem import Problem, ProblemError, load_problem

SOURCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, 24)

    def forward(self, x):
        return torch.relu(self.linear(x))

batch_size = 640
features = 96

def get_inputs():
    return [torch.randn(batch_size, features)]

def get_init_inputs():
    return [features]
"""


class TwoLayer(nn.Module):
    def __init__(self, width: int = 13) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x))


def gelu_plus_one(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) + 1.0


def test_source_is_inspected_on_meta():
    info = Problem.from_source(SOURCE, name="linear_relu").inspect()
    assert [str(s) for s in info.inputs] == ["float32[640, 96]"]
    assert [str(s) for s in info.outputs] == ["float32[640, 24]"]
    assert info.flops == 2 * 640 * 96 * 24
    assert {"addmm", "relu"} <= set(info.ops)


@pytest.mark.parametrize("missing", ["get_inputs", "get_init_inputs"])
def test_missing_names_are_clear_errors(missing):
    broken = SOURCE.replace(f"def {missing}(", f"def _{missing}(")
    with pytest.raises(ProblemError, match=f"missing: {missing}"):
        Problem.from_source(broken)


def test_non_tensor_input_is_a_clear_error():
    broken = SOURCE.replace("return [torch.randn(batch_size, features)]", "return ['not a tensor']")
    with pytest.raises(ProblemError, match="item 0 is a str"):
        Problem.from_source(broken).inspect()


def test_a_constructor_that_reads_tensor_values_is_inspected_too():
    """Swin's drop-path rates: ``torch.linspace(...)[i].item()`` cannot run on meta tensors (H200 2026-12-06:
    29_SwinMLP and 30_SwinTransformerV2 were reported invalid problems)."""
    reads = SOURCE.replace("super().__init__()", "super().__init__()\n        self.rate = torch.linspace(0, 0.1, 4)[2].item()")
    assert reads != SOURCE
    info = Problem.from_source(reads, name="reads_values").inspect()
    assert [str(s) for s in info.outputs] == ["float32[640, 24]"]
    assert info.flops == 2 * 640 * 96 * 24


def test_raising_constructor_is_a_clear_error():
    broken = SOURCE.replace("super().__init__()", "super().__init__()\n        raise RuntimeError('no weights today')")
    with pytest.raises(ProblemError, match="no weights today"):
        Problem.from_source(broken).inspect()


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ProblemError, match="not found"):
        load_problem(str(tmp_path / "nope.py"))


def test_module_with_example_inputs_keeps_weights(tmp_path):
    model = TwoLayer(13)
    problem = Problem.from_module(model, [torch.randn(5, 13)], init_inputs=[13], weights_dir=tmp_path)
    assert problem.weights_path is not None and problem.weights_path.exists()
    assert torch.equal(torch.load(problem.weights_path)["fc.weight"], model.fc.weight.detach())
    info = problem.inspect()
    assert [str(s) for s in info.outputs] == ["float32[5, 7]"]


def test_function_and_lambda_become_problems():
    info = Problem.from_function(gelu_plus_one, [torch.randn(3, 17)]).inspect()
    assert [str(s) for s in info.outputs] == ["float32[3, 17]"]
    square = lambda x: x * x  # noqa: E731
    assert "x * x" in Problem.from_function(square, [torch.randn(4)]).source


def test_scaling_is_reported_and_shrinks():
    problem = Problem.from_source(SOURCE, name="linear_relu")
    scaled = problem.scaled(max_elements=4096, max_flops=1 << 20)
    assert scaled.scaling is not None and "batch_size" in scaled.scaling
    assert scaled.scaling_note and "batch_size 640->" in scaled.scaling_note
    info = scaled.inspect()
    assert max(s.numel for s in info.inputs + info.outputs) <= 4096
    assert problem.scaling is None
