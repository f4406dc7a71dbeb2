"""The built-in generator's algebraic rewrites (``_rewrite.py``): each one, where it fires, run for real on
the Triton interpreter against the reference at odd shapes (two trials of fresh random inputs, atol = rtol
= 1e-4), its ``no-rewrites`` twin too; and near-miss patterns that must be left alone."""

from __future__ import annotations

from typing import Any

import pytest

from tritonsmith.agents.base import Candidate, GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator, _plan, menu_for, variant_label
from tritonsmith.agents.builtin._emit import emit_module
from tritonsmith.agents.builtin._ir import MM, REDUCE, UnsupportedError
from tritonsmith.core.problem import Problem

from _builtin_check import run_on_interpreter

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _problem(name: str, init: str, args: str, body: str, inputs: str) -> Problem:
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           f"        {init}\n\n    def forward(self, {args}):\n        {body}\n\n"
           f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return []\n")
    return Problem.from_source(src, name=name)


def _linear(name: str, layer: str, body: str, rows: int = 11, cols: int = 37) -> Problem:
    return _problem(name, f"self.linear = {layer}", "x", body, f"[torch.randn({rows}, {cols})]")


# name -> (problem, the rewrites that must fire)
FIRES: dict[str, tuple[Problem, list[str]]] = {
    "sum_after_linear": (_linear("sum_after_linear", "nn.Linear(37, 29)",
                                 "return torch.sum(self.linear(x), dim=1, keepdim=True)"),
                         ["gemv-of-reduced-weights"]),
    "mean_after_linear_nobias": (_linear("mean_after_linear_nobias", "nn.Linear(37, 29, bias=False)",
                                         "return torch.tanh(self.linear(x).mean(dim=-1))"),
                                 ["gemv-of-reduced-weights"]),
    "sum_after_matmul": (_problem("sum_after_matmul", "pass", "a, b", "return (a @ b).sum(1, keepdim=True) * 0.5",
                                  "[torch.randn(13, 19), torch.randn(19, 23)]"),
                         ["gemv-of-reduced-weights"]),
    # KernelBench's Gemm_Divide_Sum_Scaling: the divide sits between the product and the sum
    "sum_after_divided_linear": (_linear("sum_after_divided_linear", "nn.Linear(37, 29)",
                                         "y = self.linear(x) / 2.0\n"
                                         "        return torch.sum(y, dim=1, keepdim=True) * 1.5"),
                                 ["gemv-of-reduced-weights"]),
    "sum_after_scaled_shifted_matmul": (_problem("sum_after_scaled_shifted_matmul", "self.b = nn.Parameter("
                                                 "torch.randn(23))", "a, w",
                                                 "return (0.5 * (a @ w) + self.b - 0.25).sum(1)",
                                                 "[torch.randn(13, 19), torch.randn(19, 23)]"),
                                        ["gemv-of-reduced-weights"]),
    "avgpool_after_linear": (_linear("avgpool_after_linear", "nn.Linear(37, 45)",
                                     "y = F.avg_pool1d(self.linear(x).unsqueeze(1), 5).squeeze(1)\n"
                                     "        return torch.max(F.gelu(y) * 2.0, dim=1).values"),
                             ["linear-of-pooled-weights"]),
    "avgpool_floor_tail": (_linear("avgpool_floor_tail", "nn.Linear(37, 47)",
                                   "return nn.AvgPool1d(5)(self.linear(x).unsqueeze(1)).squeeze(1) + 1.0"),
                           ["linear-of-pooled-weights"]),
    "avgpool_after_matmul": (_problem("avgpool_after_matmul", "pass", "a, b",
                                      "return F.avg_pool1d((a @ b).unsqueeze(1), 3).squeeze(1)",
                                      "[torch.randn(13, 19), torch.randn(19, 21)]"),
                             ["linear-of-pooled-weights"]),
    "avgpool_one_window": (_linear("avgpool_one_window", "nn.Linear(37, 12)",
                                   "return torch.relu(F.avg_pool1d(self.linear(x).unsqueeze(1), 12))"),
                           ["linear-of-pooled-weights"]),
    # several 64x64 tiles per side, so whole tiles fall outside the triangle and skip their K loop
    "tril_of_matmul": (_problem("tril_of_matmul", "pass", "a, b", "return torch.tril(torch.matmul(a, b))",
                                "[torch.randn(150, 37), torch.randn(37, 141)]"), ["triangular-matmul"]),
    "triu_diag_of_matmul": (_problem("triu_diag_of_matmul", "pass", "a, b", "return torch.triu(a @ b, 1) * 2.0",
                                     "[torch.randn(131, 29), torch.randn(29, 140)]"), ["triangular-matmul"]),
    "tril_negative_diag": (_problem("tril_negative_diag", "pass", "a, b", "return torch.tril(a @ b, diagonal=-70)",
                                    "[torch.randn(145, 19), torch.randn(19, 133)]"), ["triangular-matmul"]),
    "scaled_operand_matmul": (_problem("scaled_operand_matmul", "pass", "a, b", "return torch.relu((a * 0.5) @ b)",
                                       "[torch.randn(23, 19), torch.randn(19, 29)]"), ["scalar-after-matmul"]),
    "scaled_weight_linear": (_problem("scaled_weight_linear", "self.w = nn.Parameter(torch.randn(29, 37))", "x",
                                      "return F.linear(x, self.w / 3.0) + 1.0", "[torch.randn(11, 37)]"),
                             ["scalar-after-matmul"]),
    "scaled_tril_and_sum": (_problem("scaled_tril_and_sum", "self.linear = nn.Linear(37, 29)", "a, b, x",
                                     "return torch.tril((2.0 * a) @ b), self.linear(x).sum(1)",
                                     "[torch.randn(70, 19), torch.randn(19, 67), torch.randn(11, 37)]"),
                            ["gemv-of-reduced-weights", "triangular-matmul", "scalar-after-matmul"]),
    # odd sizes, strides, paddings, dilations and cropping: every tap has its own border of unreached inputs
    "mean_after_conv_transpose": (_problem("mean_after_conv_transpose",
                                           "self.conv = nn.ConvTranspose2d(5, 7, 3, stride=2, padding=1, "
                                           "output_padding=1)", "x",
                                           "y = self.conv(x) * 0.5\n        y = torch.mean(y, dim=[2, 3], keepdim=True)"
                                           "\n        return torch.mean(y, dim=[2, 3], keepdim=True)",
                                           "[torch.randn(3, 5, 9, 11)]"), ["sum-before-convolution"]),
    "mean_after_strided_dilated_conv": (_problem("mean_after_strided_dilated_conv",
                                                 "self.conv = nn.Conv2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 2), "
                                                 "dilation=(2, 1))", "x",
                                                 "return torch.sigmoid((self.conv(x) - 0.25).mean(dim=(2, 3)))",
                                                 "[torch.randn(2, 4, 13, 10)]"), ["sum-before-convolution"]),
    "sum_after_conv1d": (_problem("sum_after_conv1d", "self.conv = nn.Conv1d(3, 5, 4, stride=3, padding=2)", "x",
                                  "return self.conv(x).sum(-1) / 7.0", "[torch.randn(4, 3, 17)]"),
                         ["sum-before-convolution"]),
    "mean_after_conv_transpose3d": (_problem("mean_after_conv_transpose3d",
                                             "self.conv = nn.ConvTranspose3d(3, 4, (2, 3, 2), stride=(1, 2, 2), "
                                             "padding=(0, 1, 1), dilation=(1, 1, 2), bias=False)", "x",
                                             "return (2.0 * self.conv(x) + 1.0).mean(dim=[2, 3, 4], keepdim=True)",
                                             "[torch.randn(2, 3, 3, 5, 4)]"), ["sum-before-convolution"]),
    "adaptive_avgpool_after_conv": (_problem("adaptive_avgpool_after_conv", "self.conv = nn.Conv2d(3, 8, 3)", "x",
                                             "return torch.flatten(F.adaptive_avg_pool2d(self.conv(x), 1), 1)",
                                             "[torch.randn(3, 3, 11, 9)]"), ["sum-before-convolution"]),
    # a sum over some spatial dims: a convolution over the others remains, of the tap sums as channels
    "mean_over_depth_after_conv_transpose3d": (_problem("mean_over_depth_after_conv_transpose3d",
                                                        "self.conv = nn.ConvTranspose3d(3, 5, 3, stride=(2, 1, 1), "
                                                        "padding=1)\n        self.bias = nn.Parameter(torch.randn(1, "
                                                        "5, 1, 1, 1))", "x",
                                                        "y = self.conv(x).mean(dim=2, keepdim=True) + self.bias\n"
                                                        "        return torch.tanh(torch.softmax(y, dim=1)) * 2.0",
                                                        "[torch.randn(2, 3, 5, 7, 6)]"), ["sum-before-convolution"]),
    "sum_over_width_after_conv2d": (_problem("sum_over_width_after_conv2d",
                                             "self.conv = nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(1, 1))", "x",
                                             "return torch.relu(self.conv(x).sum(dim=3))",
                                             "[torch.randn(2, 4, 9, 11)]"), ["sum-before-convolution"]),
    "mean_over_height_width_of_conv3d": (_problem("mean_over_height_width_of_conv3d",
                                                  "self.conv = nn.Conv3d(3, 4, (2, 3, 3), padding=(0, 1, 2), "
                                                  "dilation=(1, 2, 1))", "x",
                                                  "return self.conv(x).mean(dim=[3, 4])",
                                                  "[torch.randn(2, 3, 4, 9, 7)]"), ["sum-before-convolution"]),
    "mean_after_conv_channel_scale": (_problem("mean_after_conv_channel_scale",
                                               "self.conv = nn.Conv2d(3, 5, 3, padding=1)\n"
                                               "        self.scale = nn.Parameter(torch.randn(5, 1, 1))", "x",
                                               "return (self.conv(x) * self.scale / 3.0).mean(dim=[2, 3])",
                                               "[torch.randn(2, 3, 9, 8)]"), ["sum-before-convolution"]),
    # average pooling (kernel = stride) after a convolution: one convolution of pooled taps, p times fewer outputs
    "avgpool_after_conv_transpose3d": (_problem("avgpool_after_conv_transpose3d",
                                                "self.conv = nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1)\n"
                                                "        self.bias = nn.Parameter(torch.randn(4, 1, 1, 1))", "x",
                                                "y = nn.AvgPool3d(2)(self.conv(x) * 0.5)\n"
                                                "        return (y + self.bias) * 1.5",
                                                "[torch.randn(2, 3, 3, 5, 4)]"), ["convolution-of-pooled-weights"]),
    "avgpool_after_conv2d_floor_tail": (_problem("avgpool_after_conv2d_floor_tail",
                                                 "self.conv = nn.Conv2d(4, 6, 3, padding=1)", "x",
                                                 "return torch.sigmoid(F.avg_pool2d(self.conv(x), 2)).sum(dim=[1, 2, 3])",
                                                 "[torch.randn(3, 4, 11, 9)]"), ["convolution-of-pooled-weights"]),
    "avgpool_after_strided_dilated_conv": (_problem("avgpool_after_strided_dilated_conv",
                                                    "self.conv = nn.Conv2d(3, 5, (3, 2), stride=(2, 1), "
                                                    "padding=(1, 0), dilation=(2, 1))", "x",
                                                    "return F.avg_pool2d(self.conv(x) - 0.25, (2, 3))",
                                                    "[torch.randn(2, 3, 13, 14)]"), ["convolution-of-pooled-weights"]),
    "avgpool_after_grouped_conv_transpose": (_problem("avgpool_after_grouped_conv_transpose",
                                                      "self.conv = nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1, "
                                                      "groups=2, bias=False)", "x",
                                                      "return torch.relu(F.avg_pool2d(self.conv(x), 4))",
                                                      "[torch.randn(2, 4, 7, 9)]"), ["convolution-of-pooled-weights"]),
    "avgpool_after_dilated_conv_transpose1d": (_problem("avgpool_after_dilated_conv_transpose1d",
                                                        "self.conv = nn.ConvTranspose1d(3, 5, 4, padding=2, "
                                                        "dilation=2)", "x",
                                                        "return F.avg_pool1d(self.conv(x), 3) * 2.0",
                                                        "[torch.randn(2, 3, 13)]"), ["convolution-of-pooled-weights"]),
    "avgpool_after_cropped_conv_transpose": (_problem("avgpool_after_cropped_conv_transpose",
                                                      "self.conv = nn.ConvTranspose2d(3, 4, 5, stride=3, padding=2, "
                                                      "output_padding=1)", "x",
                                                      "return F.avg_pool2d(self.conv(x), 3, divisor_override=4)",
                                                      "[torch.randn(2, 3, 5, 6)]"), ["convolution-of-pooled-weights"]),
    # leading identities of a scan concatenated after it: the scan of the padded input, one kernel
    "exclusive_cumsum": (_problem("exclusive_cumsum", "pass", "x",
                                  "c = torch.cumsum(x.narrow(dim=1, start=0, length=x.size(1) - 1), dim=1)\n"
                                  "        return torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), c), dim=1)",
                                  "[torch.randn(5, 1037)]"), ["scan-of-padded-input"]),
    "padded_cumprod_dim0": (_problem("padded_cumprod_dim0", "pass", "x",
                                     "return torch.cat((x.new_ones(2, x.size(1)), torch.cumprod(x, dim=0)), dim=0)",
                                     "[torch.rand(13, 7) + 0.5]"), ["scan-of-padded-input"]),
    "pad_of_cumsum": (_problem("pad_of_cumsum", "pass", "x", "return F.pad(torch.cumsum(x, dim=-1), (3, 0)) * 2.0",
                               "[torch.randn(3, 4, 29)]"), ["scan-of-padded-input"]),
    # tiling poolings in a row: one window of the kernels' product (odd sizes: the floors agree)
    "max_of_max_3d": (_problem("max_of_max_3d", "self.b = nn.Parameter(torch.randn(3, 1, 1, 1))", "x",
                               "return F.max_pool3d(F.max_pool3d(x + self.b, 2), (3, 2, 3)).sum(1)",
                               "[torch.randn(2, 3, 13, 9, 14)]"), ["pool-of-pool"]),
    # a pooling of normalized values: its own copy of the chain, computed per tap from x and the statistics
    "groupnorm_then_maxpool": (_problem("groupnorm_then_maxpool", "self.gn = nn.GroupNorm(4, 8)\n"
                                        "        self.scale = nn.Parameter(torch.randn(8, 1, 1))", "x",
                                        "return torch.clamp(F.max_pool2d(self.gn(x) * self.scale, 2), -0.5, 0.5)",
                                        "[torch.randn(2, 8, 11, 13)]"), ["recompute-for-window"]),
    "softmax_then_two_maxpools": (_problem("softmax_then_two_maxpools", "pass", "x",
                                           "return F.max_pool3d(F.max_pool3d(torch.softmax(x, dim=1), 2), 2)",
                                           "[torch.randn(2, 5, 9, 10, 11)]"), ["pool-of-pool", "recompute-for-window"]),
    "batchnorm_relu_padded_avgpool": (_problem("batchnorm_relu_padded_avgpool", "self.bn = nn.BatchNorm2d(6)", "x",
                                               "return F.avg_pool2d(torch.relu(self.bn(x)) - 1.0, 3, 2, 1)",
                                               "[torch.randn(3, 6, 9, 11)]"), ["recompute-for-window"]),
    "avg_of_avg_2d": (_problem("avg_of_avg_2d", "pass", "x",
                               "return torch.tanh(F.avg_pool2d(F.avg_pool2d(x * 2.0, (1, 2)), 3))",
                               "[torch.randn(2, 3, 11, 13)]"), ["pool-of-pool"]),
}

# name -> problem where a rewrite almost applies but must not
NEAR_MISSES: dict[str, Problem] = {
    "sum_over_batch": _linear("sum_over_batch", "nn.Linear(37, 29)", "return self.linear(x).sum(0)"),
    "sum_after_times_tensor": _problem("sum_after_times_tensor", "self.linear = nn.Linear(37, 29)", "x, t",
                                       "return (self.linear(x) * t).sum(1)", "[torch.randn(11, 37), torch.randn(11, 29)]"),
    "sum_after_row_shift": _problem("sum_after_row_shift", "self.linear = nn.Linear(37, 29)", "x, c",
                                    "return (self.linear(x) - c).sum(1)", "[torch.randn(11, 37), torch.randn(11, 1)]"),
    "sum_after_relu": _linear("sum_after_relu", "nn.Linear(37, 29)", "return torch.relu(self.linear(x)).sum(1)"),
    "linear_read_twice": _linear("linear_read_twice", "nn.Linear(37, 29)",
                                 "y = self.linear(x)\n        return y.sum(1, keepdim=True) + y"),
    "sum_of_bmm": _problem("sum_of_bmm", "pass", "a, b", "return torch.bmm(a, b).sum(-1)",
                           "[torch.randn(3, 13, 19), torch.randn(3, 19, 23)]"),
    "sum_with_row_bias": _problem("sum_with_row_bias", "pass", "a, b, c", "return (a @ b + c).sum(1)",
                                  "[torch.randn(13, 19), torch.randn(19, 23), torch.randn(13, 1)]"),
    "avgpool_overlapping": _linear("avgpool_overlapping", "nn.Linear(37, 45)",
                                   "return F.avg_pool1d(self.linear(x).unsqueeze(1), 4, stride=2)"),
    "avgpool_padded": _linear("avgpool_padded", "nn.Linear(37, 45)",
                              "return F.avg_pool1d(self.linear(x).unsqueeze(1), 5, padding=2)"),
    "avgpool_ceil_partial": _linear("avgpool_ceil_partial", "nn.Linear(37, 47)",
                                    "return F.avg_pool1d(self.linear(x).unsqueeze(1), 5, ceil_mode=True)"),
    "maxpool_after_linear": _linear("maxpool_after_linear", "nn.Linear(37, 45)",
                                    "return F.max_pool1d(self.linear(x).unsqueeze(1), 5)"),
    "tril_of_relu_matmul": _problem("tril_of_relu_matmul", "pass", "a, b", "return torch.tril(torch.relu(a @ b))",
                                    "[torch.randn(13, 19), torch.randn(19, 13)]"),
    "tril_and_matmul_read": _problem("tril_and_matmul_read", "pass", "a, b",
                                     "c = a @ b\n        return torch.tril(c) + c",
                                     "[torch.randn(13, 19), torch.randn(19, 13)]"),
    "tril_of_bmm": _problem("tril_of_bmm", "pass", "a, b", "return torch.tril(torch.bmm(a, b))",
                            "[torch.randn(2, 13, 19), torch.randn(2, 19, 13)]"),
    "scaled_operand_read_twice": _problem("scaled_operand_read_twice", "pass", "a, b",
                                          "s = a * 0.5\n        return s @ b, s",
                                          "[torch.randn(23, 19), torch.randn(19, 29)]"),
    "operand_times_tensor": _problem("operand_times_tensor", "pass", "a, b, c", "return (a * c) @ b",
                                     "[torch.randn(23, 19), torch.randn(19, 29), torch.randn(1, 19)]"),
    "operand_broadcast_scalar_add": _problem("operand_broadcast_scalar_add", "pass", "a, b", "return (a + 2.0) @ b",
                                             "[torch.randn(23, 19), torch.randn(19, 29)]"),
    "mean_after_conv_relu": _problem("mean_after_conv_relu", "self.conv = nn.Conv2d(3, 5, 3)", "x",
                                     "return torch.relu(self.conv(x)).mean(dim=[2, 3])", "[torch.randn(2, 3, 9, 8)]"),
    "mean_after_grouped_conv": _problem("mean_after_grouped_conv", "self.conv = nn.Conv2d(4, 6, 3, groups=2)", "x",
                                        "return self.conv(x).mean(dim=[2, 3])", "[torch.randn(2, 4, 9, 8)]"),
    "mean_over_channels": _problem("mean_over_channels", "self.conv = nn.Conv2d(3, 5, 3)", "x",
                                   "return self.conv(x).mean(dim=1)", "[torch.randn(2, 3, 9, 8)]"),
    "conv_read_twice": _problem("conv_read_twice", "self.conv = nn.Conv2d(3, 5, 3)", "x",
                                "y = self.conv(x)\n        return y.mean(dim=[2, 3], keepdim=True) + y",
                                "[torch.randn(2, 3, 9, 8)]"),
    "conv_times_tensor_mean": _problem("conv_times_tensor_mean", "self.conv = nn.Conv2d(3, 5, 3)", "x, s",
                                       "return (self.conv(x) * s).mean(dim=[2, 3])",
                                       "[torch.randn(2, 3, 9, 8), torch.randn(2, 5, 7, 6)]"),
    "conv_avgpool_overlapping": _problem("conv_avgpool_overlapping", "self.conv = nn.Conv2d(3, 5, 3)", "x",
                                         "return F.avg_pool2d(self.conv(x), 3, stride=2)", "[torch.randn(2, 3, 11, 9)]"),
    "conv_avgpool_padded": _problem("conv_avgpool_padded", "self.conv = nn.Conv2d(3, 5, 3)", "x",
                                    "return F.avg_pool2d(self.conv(x), 2, padding=1)", "[torch.randn(2, 3, 11, 9)]"),
    "conv_relu_avgpool": _problem("conv_relu_avgpool", "self.conv = nn.Conv2d(3, 5, 3)", "x",
                                  "return F.avg_pool2d(torch.relu(self.conv(x)), 2)", "[torch.randn(2, 3, 11, 9)]"),
    "conv_transpose_stride2_avgpool3": _problem("conv_transpose_stride2_avgpool3",
                                                "self.conv = nn.ConvTranspose2d(3, 5, 3, stride=2)", "x",
                                                "return F.avg_pool2d(self.conv(x), 3)", "[torch.randn(2, 3, 7, 6)]"),
    "conv_avgpool_and_conv_read": _problem("conv_avgpool_and_conv_read", "self.conv = nn.Conv2d(3, 5, 3)", "x",
                                           "y = self.conv(x)\n        return F.avg_pool2d(y, 2), y",
                                           "[torch.randn(2, 3, 11, 9)]"),
    "conv_avgpool_ceil_partial": _problem("conv_avgpool_ceil_partial", "self.conv = nn.Conv2d(3, 5, 3)", "x",
                                          "return F.avg_pool2d(self.conv(x), 2, ceil_mode=True)",
                                          "[torch.randn(2, 3, 10, 9)]"),
    "cumsum_after_ones": _problem("cumsum_after_ones", "pass", "x",
                                  "return torch.cat((x.new_ones(x.size(0), 1), torch.cumsum(x, dim=1)), dim=1)",
                                  "[torch.randn(5, 17)]"),
    "cumsum_then_zeros": _problem("cumsum_then_zeros", "pass", "x",
                                  "return torch.cat((torch.cumsum(x, dim=1), x.new_zeros(x.size(0), 1)), dim=1)",
                                  "[torch.randn(5, 17)]"),
    "zeros_across_the_scan": _problem("zeros_across_the_scan", "pass", "x",
                                      "return torch.cat((x.new_zeros(1, 17), torch.cumsum(x, dim=1)), dim=0)",
                                      "[torch.randn(5, 17)]"),
    "cumsum_read_twice": _problem("cumsum_read_twice", "pass", "x",
                                  "c = torch.cumsum(x, dim=1)\n"
                                  "        return torch.cat((x.new_zeros(x.size(0), 1), c), dim=1), c",
                                  "[torch.randn(5, 17)]"),
    "max_of_avg_pool": _problem("max_of_avg_pool", "pass", "x", "return F.max_pool2d(F.avg_pool2d(x, 2), 2)",
                                "[torch.randn(2, 3, 11, 13)]"),
    "overlapping_max_of_max": _problem("overlapping_max_of_max", "pass", "x",
                                       "return F.max_pool2d(F.max_pool2d(x, 3, 2), 2)", "[torch.randn(2, 3, 11, 13)]"),
    "padded_max_of_max": _problem("padded_max_of_max", "pass", "x",
                                  "return F.max_pool2d(F.max_pool2d(x, 2, padding=1), 2)", "[torch.randn(2, 3, 11, 13)]"),
    "ceil_max_of_max": _problem("ceil_max_of_max", "pass", "x",
                                "return F.max_pool2d(F.max_pool2d(x, 2, ceil_mode=True), 2)",
                                "[torch.randn(2, 3, 11, 13)]"),
    "pooled_value_read_twice": _problem("pooled_value_read_twice", "pass", "x",
                                        "y = F.max_pool2d(x, 2)\n        return F.max_pool2d(y, 2), y",
                                        "[torch.randn(2, 3, 11, 13)]"),
    "normalized_value_returned": _problem("normalized_value_returned", "self.gn = nn.GroupNorm(2, 4)", "x",
                                          "y = self.gn(x)\n        return F.max_pool2d(y, 2), y",
                                          "[torch.randn(2, 4, 9, 11)]"),
    "pooled_chain_without_statistics": _problem("pooled_chain_without_statistics", "pass", "x",
                                                "return F.max_pool2d(torch.relu(x) * 2.0, 2)",
                                                "[torch.randn(2, 4, 9, 11)]"),
    "conv_bias_then_maxpool": _problem("conv_bias_then_maxpool", "self.conv = nn.Conv2d(3, 4, 3)", "x",
                                       "return F.max_pool2d(torch.relu(self.conv(x)), 2)",
                                       "[torch.randn(2, 3, 9, 11)]"),  # a viewed bias is no statistic
    "avgpool_over_rows": _problem("avgpool_over_rows", "self.linear = nn.Linear(37, 45)", "x",
                                  "return F.avg_pool1d(self.linear(x).t().unsqueeze(0), 5)",
                                  "[torch.randn(10, 37)]"),
}


def _no_rewrites_source(problem: Problem) -> str | None:
    """The ``no-rewrites`` variant's source; None where the plain lowering cannot be written."""
    variant = next(v for v in menu_for(problem, None)[0] if v.key == "no-rewrites")
    traced, plan = _plan(problem, variant.options, None)
    assert traced.rewrites == []
    try:
        return emit_module(problem.name, problem.source, traced, plan, variant.overrides,
                           variant_label(variant, traced))
    except UnsupportedError:
        return None


@pytest.fixture(scope="module")
def generated() -> dict[str, Candidate]:
    gen = BuiltinGenerator()
    return {name: gen.generate(GenerationRequest(problem=p, iteration=0)) for name, (p, _) in FIRES.items()}


@pytest.fixture(scope="module")
def interpreted(generated: dict[str, Candidate], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Rewritten and plain candidates checked in one interpreter subprocess (start-up dominates the cost)."""
    pairs: dict[str, tuple[str, str | None]] = {}
    for name, (problem, _) in FIRES.items():
        pairs[name] = (problem.source, generated[name].source)
        pairs[f"{name}__plain"] = (problem.source, _no_rewrites_source(problem))
    return run_on_interpreter(tmp_path_factory.mktemp("builtin_rewrite"), pairs)


@pytest.mark.parametrize("name", list(FIRES))
def test_rewrite_fires_is_reported_and_matches_reference(name: str, generated: dict[str, Candidate],
                                                         interpreted: dict[str, Any]) -> None:
    cand = generated[name]
    assert cand.source is not None, cand.note
    want = FIRES[name][1]
    assert f"rewrites: {', '.join(want)}" in cand.note
    assert f"rewrites: {', '.join(want)}" in cand.source  # the module's header says it too
    assert interpreted[name]["ok"], interpreted[name]["detail"]
    # the graph as traced is written too (tril's index grid: a kernel of constants since 2026-12-06) and correct
    assert interpreted[f"{name}__plain"]["ok"], interpreted[f"{name}__plain"]["detail"]


@pytest.mark.parametrize("name", list(FIRES))
def test_no_rewrites_variant_comes_last(name: str) -> None:
    menu, _ = menu_for(FIRES[name][0], None)
    assert menu[-1].key == "no-rewrites" and menu[-1].options.get("no_rewrites") is True
    assert sum(v.key == "no-rewrites" for v in menu) == 1


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_near_miss_is_left_alone(name: str) -> None:
    traced, _ = _plan(NEAR_MISSES[name], {}, None)
    assert traced.rewrites == []
    assert all(v.key != "no-rewrites" for v in menu_for(NEAR_MISSES[name], None)[0])


def test_sum_after_linear_is_one_pass_over_x_and_one_over_w() -> None:
    """No GEMM left: the weights summed over the output features (a reduction over dim 0 of W [29, 37]),
    then x times that vector summed over K."""
    traced, plan = _plan(FIRES["sum_after_linear"][0], {}, None)
    live = [n for g in plan.groups for n in g.nodes]
    assert not any(n.kind == MM for n in live)
    sums = [n for n in live if n.kind == REDUCE]
    assert [n.shape for n in sums] == [(1, 1, 37), (11, 1), (1, 1)]  # W rows, x @ w, bias


def test_avgpool_after_linear_gemm_has_pooled_outputs() -> None:
    traced, plan = _plan(FIRES["avgpool_after_linear"][0], {}, None)
    mms = [g.nodes[0] for g in plan.groups if g.kind == "matmul"]
    assert [m.shape for m in mms] == [(11, 9)]
    traced, plan = _plan(FIRES["avgpool_after_linear"][0], {"no_rewrites": True}, None)
    assert [g.nodes[0].shape for g in plan.groups if g.kind == "matmul"] == [(11, 45)]


def test_triangular_matmul_skips_zero_tiles_and_masks_in_the_kernel(generated: dict[str, Candidate]) -> None:
    src = generated["tril_of_matmul"].source
    assert src is not None
    kernel = src.split("def _matmul_0_kernel(", 1)[1].split("\n\n\n", 1)[0]
    assert "k_stop = tl.where(pid_n * BLOCK_N - (pid_m * BLOCK_M + BLOCK_M - 1) > 0, 0, K)" in kernel
    assert "for k0 in range(0, k_stop, BLOCK_K)" in kernel
    assert "acc = tl.where(rn[None, :] - rm[:, None] <= 0, acc, 0.0)" in kernel
    assert "_pointwise" not in src  # the index grids of tril's decomposition are gone
    triu = generated["triu_diag_of_matmul"].source
    assert triu is not None and "pid_n * BLOCK_N + BLOCK_N - 1 - pid_m * BLOCK_M < 1" in triu


def test_scalar_after_matmul_leaves_one_kernel() -> None:
    """The scaled copy of the operand is gone: the scale is one multiply in the matmul's epilogue."""
    _, plan = _plan(FIRES["scaled_operand_matmul"][0], {}, None)
    assert [g.kind for g in plan.groups] == ["matmul"]
    _, plain = _plan(FIRES["scaled_operand_matmul"][0], {"no_rewrites": True}, None)
    assert [g.kind for g in plain.groups] == ["pointwise", "matmul"]


@pytest.mark.parametrize("name", ["mean_after_conv_transpose", "mean_after_strided_dilated_conv", "sum_after_conv1d"])
def test_sum_before_convolution_writes_no_convolution_and_stays_shape_generic(
        name: str, generated: dict[str, Candidate]) -> None:
    """The convolution is gone (its output was only summed), the tap masks are computed inside the kernel
    that sums the input (no kernel of constants), and the kernels take the batch size at run time."""
    src = generated[name].source
    assert src is not None and "F.conv" not in src and "would read no tensor" not in generated[name].note
    assert "shape-generic" in generated[name].note, generated[name].note


@pytest.mark.parametrize("name, call", [("mean_over_depth_after_conv_transpose3d", "F.conv_transpose2d("),
                                        ("sum_over_width_after_conv2d", "F.conv1d("),
                                        ("mean_over_height_width_of_conv3d", "F.conv1d(")])
def test_a_partial_spatial_sum_leaves_a_lower_dimensional_convolution(
        name: str, call: str, generated: dict[str, Candidate]) -> None:
    """Summed over some spatial dims, the convolution keeps the others only: one call, that many dims."""
    src = generated[name].source
    assert src is not None and src.count("F.conv") == 1 and call in src, src
    assert "shape-generic" in generated[name].note, generated[name].note


@pytest.mark.parametrize("name, call", [("avgpool_after_conv_transpose3d", "F.conv3d("),
                                        ("avgpool_after_grouped_conv_transpose", "F.conv2d("),
                                        ("avgpool_after_dilated_conv_transpose1d", "F.conv1d("),
                                        ("avgpool_after_conv2d_floor_tail", "F.conv2d(")])
def test_pooled_convolution_is_one_plain_convolution_with_pooled_outputs(
        name: str, call: str, generated: dict[str, Candidate]) -> None:
    """No transposed convolution and no pooling window remain: one plain convolution that writes the pooled
    outputs only (its stride is the pooling's), and the kernels stay shape-generic."""
    src = generated[name].source
    assert src is not None and src.count("F.conv") == 1 and call in src and "F.conv_transpose" not in src, src
    _, plan = _plan(FIRES[name][0], {}, None)
    assert not any(n.kind == "window" for g in plan.groups for n in g.nodes)
    assert "shape-generic" in generated[name].note, generated[name].note


def test_pooled_convolution_in_triton_matches_reference(tmp_path: Any) -> None:
    """The conv-triton variant: the pooled convolution is an implicit-GEMM Triton kernel (no torch call)."""
    pairs: dict[str, tuple[str, str | None]] = {}
    for name in ("avgpool_after_conv_transpose3d", "avgpool_after_strided_dilated_conv"):
        problem = FIRES[name][0]
        variant = next(v for v in menu_for(problem, None)[0] if v.key == "conv-triton")
        traced, plan = _plan(problem, variant.options, None)
        assert traced.rewrites == ["convolution-of-pooled-weights"]
        src = emit_module(problem.name, problem.source, traced, plan, variant.overrides, variant_label(variant, traced))
        assert "F.conv" not in src
        pairs[name] = (problem.source, src)
    checked = run_on_interpreter(tmp_path, pairs)
    for name, result in checked.items():
        assert result["ok"], (name, result["detail"])


def test_exclusive_cumsum_is_one_scan_kernel() -> None:
    """The concatenation is the scan's prologue: one kernel reads x shifted and writes the output once."""
    _, plan = _plan(FIRES["exclusive_cumsum"][0], {}, None)
    assert [g.kind for g in plan.groups] == ["scan"]
    _, plain = _plan(FIRES["exclusive_cumsum"][0], {"no_rewrites": True}, None)
    assert [g.kind for g in plain.groups] == ["scan", "pointwise"]


def test_pool_of_pool_is_one_window_kernel() -> None:
    """Two tiling max poolings become one window of the kernels' product: one window kernel, which also takes the
    bias add before it as its prologue (nothing of the input's size is stored)."""
    _, plan = _plan(FIRES["max_of_max_3d"][0], {}, None)
    windows = [g for g in plan.groups if g.kind == "window"]
    assert len(windows) == 1 and windows[0].nodes[0].attrs["kernel"] == (1, 1, 6, 4, 6)
    assert [n.op for n in windows[0].prologue] == ["add"]
    assert all(g.kind != "pointwise" for g in plan.groups)


def test_pooled_normalization_stores_only_statistics() -> None:
    """GroupNorm then a pooling: the row kernel stores the statistics only ([N, groups, 1] values), and the window
    kernel computes the normalized value per tap from the input and those statistics (no pointwise kernel, and
    nothing of the input's size stored but the pooled output)."""
    _, plan = _plan(FIRES["groupnorm_then_maxpool"][0], {}, None)
    rows = [g for g in plan.groups if g.kind == "row"]
    windows = [g for g in plan.groups if g.kind == "window"]
    assert len(rows) == 1 and len(windows) == 1 and all(g.kind in ("row", "window") for g in plan.groups)
    assert rows[0].outputs and all(o.numel == 2 * 4 for o in rows[0].outputs)
    assert {o.id for o in rows[0].outputs} <= {a.id for n in windows[0].prologue for a in n.node_args()}
    # the statistics are per (image, group): the same across a window, so loaded once per output
    src = BuiltinGenerator().generate(GenerationRequest(problem=FIRES["groupnorm_then_maxpool"][0], iteration=0)).source
    window = (src or "").split("def _window_0_kernel(", 1)[1].split("\n\n\n", 1)[0]
    before, loops = window.split("tl.static_range(", 1)
    assert before.count("tl.load(") == 5 and loops.count("tl.load(") == 1  # 2 statistics, 3 per channel; x per tap
