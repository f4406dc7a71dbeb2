"""The conv-cl variant (``_convcl.py``): channels-last convolution input, epilogue walked in channels-last
order, run for real on the Triton interpreter against the reference (two trials of fresh random inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem

from _builtin_check import run_on_interpreter

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _problem(name: str, init: str, forward: str, inputs: str) -> Problem:
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}\n"
           f"    def forward(self, x):\n{forward}\n\n"
           f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return []\n")
    return Problem.from_source(src, name=name)


CASES = {
    # 37 input channels: two channel tiles of the transpose, the second ragged; 9 x 10 positions: two ragged
    "conv2d_relu_bias": _problem(
        "conv2d_relu_bias", "        self.conv = nn.Conv2d(37, 6, 3)\n        self.bias = nn.Parameter(torch.randn(6, 1, 1))",
        "        return torch.relu(self.conv(x)) + self.bias", "[torch.randn(2, 37, 9, 10)]"),
    "conv_transpose2d_tanh": _problem(
        "conv_transpose2d_tanh", "        self.conv = nn.ConvTranspose2d(5, 7, 3, stride=2, padding=1, output_padding=1)",
        "        y = self.conv(x)\n        return torch.tanh(y - 0.3) * 1.5", "[torch.randn(3, 5, 7, 6)]"),
    "conv3d_sigmoid_residual": _problem(
        "conv3d_sigmoid_residual", "        self.conv = nn.Conv3d(3, 4, 2)",
        "        y = self.conv(x)\n        return torch.sigmoid(y) * y + y.abs()", "[torch.randn(2, 3, 5, 6, 7)]"),
}


@pytest.fixture(scope="module")
def generated() -> dict[str, Any]:
    return {n: BuiltinGenerator().generate(GenerationRequest(problem=p, iteration=0)) for n, p in CASES.items()}


@pytest.fixture(scope="module")
def interpreted(generated: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pairs = {name: (problem.source, generated[name].source) for name, problem in CASES.items()}
    return run_on_interpreter(tmp_path_factory.mktemp("convcl"), pairs)


@pytest.mark.parametrize("name", list(CASES))
def test_conv_cl_is_tried_first_and_matches_reference(name: str, generated: dict[str, Any],
                                                      interpreted: dict[str, Any]) -> None:
    cand = generated[name]
    assert cand.variant == "conv-cl", cand.note
    src = cand.source
    assert "_to_channels_last(x)" in src and "def _to_channels_last_kernel(" in src
    fmt = "torch.channels_last_3d" if "3d" in name else "torch.channels_last"
    assert f"memory_format={fmt})" in src  # the epilogue's output keeps the convolution's layout
    assert interpreted[name]["ok"], interpreted[name]["detail"]


def test_default_layout_stays_available_after_conv_cl() -> None:
    from tritonsmith.agents.base import Attempt

    problem = CASES["conv2d_relu_bias"]
    gen = BuiltinGenerator()
    first = gen.generate(GenerationRequest(problem=problem, iteration=0))
    tried = Attempt(iteration=0, source=first.source, result=None, feedback="", reward=0.0, generator="builtin",
                    variant=first.variant)
    second = gen.generate(GenerationRequest(problem=problem, iteration=1, history=(tried,)))
    assert second.variant == "default" and "_to_channels_last" not in (second.source or "")


@pytest.mark.parametrize("forward", [
    "        return F.group_norm(self.conv(x), 2)",  # a row kernel after the convolution
    "        y = self.conv(x)\n        return torch.relu(y).flatten(1)",  # the output is a view
    "        y = self.conv(x)\n        return torch.relu(y), y.sum(dim=1)",  # a second Triton group
])
def test_conv_cl_not_offered_for_other_epilogues(forward: str) -> None:
    problem = _problem("other", "        self.conv = nn.Conv2d(3, 4, 3)", forward, "[torch.randn(2, 3, 8, 9)]")
    state = BuiltinGenerator()._state(problem)
    assert state.error is None and state.menu, state.error
    assert "conv-cl" not in [v.key for v in state.menu]


# -- net-cl: channels-last across a network ---------------------------------------------------------------
def _net(name: str, init: str, forward: str, inputs: str) -> Problem:
    return _problem(name, init, forward, inputs)


NETS = {
    # VGG-like: conv, relu, conv, relu, max pool (a window kernel reads channels-last), conv, then a flatten
    # into a linear layer (a reshape of a channels-last value needs a copy: that value stays contiguous)
    "vgg_like": _net(
        "vgg_like",
        "        self.c1 = nn.Conv2d(3, 5, 3, padding=1)\n        self.c2 = nn.Conv2d(5, 6, 3, padding=1)\n"
        "        self.c3 = nn.Conv2d(6, 7, 3)\n        self.fc = nn.Linear(7 * 2 * 3, 9)",
        "        x = torch.relu(self.c1(x))\n        x = torch.relu(self.c2(x))\n        x = F.max_pool2d(x, 2)\n"
        "        x = torch.relu(self.c3(x))\n        return self.fc(torch.flatten(x, 1))",
        "[torch.randn(2, 3, 9, 11)]"),
    # ResNet-like: BatchNorm in training mode (row kernels reading and storing channels-last), a residual
    # add of the block's input, a 1x1 projection
    "resnet_like": _net(
        "resnet_like",
        "        self.c1 = nn.Conv2d(4, 6, 3, padding=1, bias=False)\n        self.b1 = nn.BatchNorm2d(6)\n"
        "        self.c2 = nn.Conv2d(6, 6, 3, padding=1, bias=False)\n        self.b2 = nn.BatchNorm2d(6)\n"
        "        self.proj = nn.Conv2d(4, 6, 1, bias=False)",
        "        y = torch.relu(self.b1(self.c1(x)))\n        y = self.b2(self.c2(y))\n"
        "        return torch.relu(y + self.proj(x))",
        "[torch.randn(3, 4, 7, 5)]"),
    # MobileNet-like: a depthwise convolution (a window kernel) between two dense 1x1 convolutions
    "mobilenet_like": _net(
        "mobilenet_like",
        "        self.a = nn.Conv2d(3, 8, 1)\n        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)\n"
        "        self.b = nn.Conv2d(8, 5, 1)",
        # the head's relu6 keeps the last convolution: a bare mean of it is rewritten (sum-before-convolution)
        "        x = F.relu6(self.a(x))\n        x = F.relu6(self.dw(x))\n        return F.relu6(self.b(x)).mean(dim=(2, 3))",
        "[torch.randn(2, 3, 6, 7)]"),
    # a torch call other than a convolution (an adaptive pool over sizes that do not divide) reads the
    # second convolution's output: that output stays contiguous, the first one's chain still goes channels-last
    "torch_reader": _net(
        "torch_reader", "        self.c1 = nn.Conv2d(3, 5, 3, padding=1)\n        self.c2 = nn.Conv2d(5, 4, 3, padding=1)",
        "        x = torch.relu(self.c1(x))\n        x = self.c2(x)\n"
        "        return torch.sigmoid(F.adaptive_avg_pool2d(x, (3, 2)))", "[torch.randn(2, 3, 7, 5)]"),
    # DenseNet-like: BatchNorm + relu of a concatenation (row kernels) between convolutions, concatenated
    "dense_like": _net(
        "dense_like", "        self.b1 = nn.BatchNorm2d(3)\n        self.c1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)\n"
        "        self.b2 = nn.BatchNorm2d(7)\n        self.c2 = nn.Conv2d(7, 4, 3, padding=1, bias=False)",
        "        y = self.c1(torch.relu(self.b1(x)))\n        x = torch.cat([x, y], 1)\n"
        "        y = self.c2(torch.relu(self.b2(x)))\n        return torch.cat([x, y], 1)", "[torch.randn(2, 3, 6, 5)]"),
    # BatchNorm over more positions than one pass holds (2 x 128 x 131 per channel): its statistics split over
    # positions, channels side by side, as the real networks' do
    "bn_wide": _net(
        "bn_wide", "        self.c1 = nn.Conv2d(3, 6, 3, padding=1, bias=False)\n        self.b1 = nn.BatchNorm2d(6)\n"
        "        self.c2 = nn.Conv2d(6, 5, 1)", "        return self.c2(torch.relu(self.b1(self.c1(x))))",
        "[torch.randn(2, 3, 128, 131)]"),
    # fewer positions (2 x 40 x 41 per channel, a late layer's size): still split, or 6 channels are one program
    "bn_mid": _net(
        "bn_mid", "        self.c1 = nn.Conv2d(3, 6, 3, padding=1, bias=False)\n        self.b1 = nn.BatchNorm2d(6)\n"
        "        self.c2 = nn.Conv2d(6, 5, 1)", "        return self.c2(torch.relu(self.b1(self.c1(x))))",
        "[torch.randn(2, 3, 40, 41)]"),
}


@pytest.fixture(scope="module")
def net_written() -> dict[str, Any]:
    from tritonsmith.agents.builtin import _write

    out = {}
    for name, problem in NETS.items():
        state = BuiltinGenerator()._state(problem)
        assert state.error is None, state.error
        keys = [v.key for v in state.menu]
        assert keys.index("net-cl") == 1, keys  # the row-major first variant stays first
        variant = state.menu[1]
        out[name] = (variant, *_write(problem, state, variant))
    return out


@pytest.fixture(scope="module")
def net_interpreted(net_written: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pairs = {name: (problem.source, net_written[name][3]) for name, problem in NETS.items()}
    return run_on_interpreter(tmp_path_factory.mktemp("netcl"), pairs)


@pytest.mark.parametrize("name", list(NETS))
def test_net_cl_matches_reference_on_the_interpreter(name: str, net_written: dict[str, Any],
                                                     net_interpreted: dict[str, Any]) -> None:
    variant, _, plan, src = net_written[name]
    assert "without a transpose" in variant.why
    assert "memory_format=torch.channels_last" in src  # some kernel stores channels-last
    if name in ("vgg_like", "mobilenet_like"):  # the pooling / depthwise window walks channel-fastest
        assert "the lanes walk channels-last: channel fastest" in src
    assert net_interpreted[name]["ok"], net_interpreted[name]["detail"]


def test_net_cl_layout_keeps_contiguous_what_a_reader_needs() -> None:
    """vgg_like: the first convolution's input (the model's) is transposed, the other two are not; the last
    relu's output feeds a flatten (a reshape of a channels-last tensor needs a copy): it stays contiguous."""
    from tritonsmith.agents.builtin import _plan
    from tritonsmith.agents.builtin._convcl import plan_network

    problem = NETS["vgg_like"]
    _, plan = _plan(problem, {}, None)
    net = plan_network(plan)
    assert net is not None and len(net.convs) == 3 and len(net.direct) == 2
    flat = next(o for o in plan.graph.nodes if o.kind == "view" and len(o.shape) == 2)
    last_relu = resolve(flat, plan)
    assert last_relu.id not in net.values


def resolve(a: Any, plan: Any) -> Any:
    from tritonsmith.agents.builtin._partition import resolve_base

    return resolve_base(a, plan.owner)


SINGLES = {
    # one convolution feeding reductions (GroupNorm's statistics, a global mean): net-cl second, its kernels
    # reading the convolution's channels-last output through its strides
    "single_gn": _problem("single_gn", "        self.conv = nn.Conv2d(3, 4, 3)",
                          "        return F.group_norm(self.conv(x), 2)", "[torch.randn(2, 3, 8, 9)]"),
    "single_gelu_mean": _problem("single_gelu_mean", "        self.conv = nn.Conv2d(5, 6, 3)",
                                 "        return F.gelu(self.conv(x)).mean(dim=(2, 3))", "[torch.randn(3, 5, 9, 7)]"),
}


def test_net_cl_for_a_single_convolution_feeding_reductions(tmp_path: Path) -> None:
    """H100 2026-12-08: cuDNN ran KernelBench L2 67's and 73's NCHW convolutions (8 input channels) in FP32 FFMA
    kernels at twice the time of torch.compile's channels-last TF32 call; the variant is their second attempt."""
    from tritonsmith.agents.builtin import _write

    pairs = {}
    for name, problem in SINGLES.items():
        state = BuiltinGenerator()._state(problem)
        keys = [v.key for v in state.menu]
        assert state.error is None and keys.index("net-cl") == 1, keys
        variant = state.menu[1]
        assert "the convolution channels-last" in variant.why
        src = _write(problem, state, variant)[2]
        assert src.count("_to_channels_last(") == 2  # the helper's def and one call
        pairs[name] = (problem.source, src)
    for name, result in run_on_interpreter(tmp_path, pairs).items():
        assert result["ok"], (name, result["detail"])


def test_net_cl_not_offered_for_a_single_convolution_with_one_pointwise_epilogue() -> None:
    """That is conv-cl's case (first on the menu); net-cl would write the same kernels."""
    problem = _problem("single_pw", "        self.conv = nn.Conv2d(3, 4, 3)",
                       "        return torch.relu(self.conv(x)) * 0.5", "[torch.randn(2, 3, 8, 9)]")
    keys = [v.key for v in BuiltinGenerator()._state(problem).menu]
    assert keys[0] == "conv-cl" and "net-cl" not in keys



def test_net_cl_batchnorm_statistics_tile_channels_side_by_side(net_written: dict[str, Any]) -> None:
    """bn_wide: the statistics of a channels-last value reduce over positions C apart; one channel per
    program would load one word per sector (H200 2026-12-06: net-cl BatchNorm networks 0.19-0.36x torch.compile)."""
    import re

    for name in ("bn_wide", "bn_mid"):
        src = net_written[name][3]
        stats = re.search(r"_row_0_stats0_kernel\[.*BLOCK_K=(\d+), BLOCK_R=(\d+), BLOCK_S=(\d+), SPLIT=(\d+)", src)
        assert stats is not None, src[-3000:]
        block_k, block_r, block_s, split = map(int, stats.groups())
        assert block_k == 8 and split > 1 and block_k * block_s <= 4096, (name, stats.groups())


def test_net_cl_writes_a_network_whose_pointwise_groups_all_stay_row_major(net_written: dict[str, Any]) -> None:
    """dense_like: its pointwise groups concatenate (row-major indexing), so none walks channels-last; its row
    kernels store channels-last all the same (the variant once raised conv-cl's error here)."""
    _, _, plan, src = net_written["dense_like"]
    assert plan.cl_groups == set()
    assert "F.conv2d(t" in src and src.count("_to_channels_last(") == 2  # the helper's def and one call


def test_net_cl_copies_an_input_read_by_two_convolutions_once(net_written: dict[str, Any]) -> None:
    """resnet_like: the block's input feeds the first convolution and the projection: one transpose."""
    src = net_written["resnet_like"][3]
    assert src.count(" = _to_channels_last(x)") == 1 and src.count("F.conv2d(cl") == 2


def test_net_cl_leaves_contiguous_a_value_another_torch_call_reads(net_written: dict[str, Any]) -> None:
    """torch_reader: the pool reads the second convolution's bias add (a Triton kernel's output): that output
    is stored contiguous, while both convolutions and the first relu are channels-last."""
    from tritonsmith.agents.builtin._partition import resolve_base

    _, _, plan, src = net_written["torch_reader"]
    convs = [g.nodes[0] for g in plan.groups if g.kind == "torch" and g.nodes[0].attrs.get("op") == "conv"]
    pool = next(g.nodes[0] for g in plan.groups if g.kind == "torch" and "adaptive" in g.nodes[0].attrs.get("op", ""))
    read = resolve_base(pool.args[0], plan.owner)
    assert all(c.attrs.get("channels_last") for c in convs) and len(convs) == 2
    assert plan.owner[read.id].kind != "torch" and not read.attrs.get("channels_last")
    assert "F.conv2d(t" in src  # the second convolution reads the first one's channels-last relu as it is
