"""The built-in generator on module trees: parameters and buffers of numeric children (``Sequential``,
``ModuleList``), nested ``ModuleDict``, shared modules, buffers, and the reference's own submodule classes.
Names in the generated code must be valid Python that reads the same tensor as the reference
(``self.features[3].weight``); the candidates are checked through the evaluator on the Triton interpreter."""

from __future__ import annotations

import ast
import re

import pytest
import torch
import torch.nn as nn

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.agents.builtin._trace import attribute_expr
from tritonsmith.core.problem import Problem

_TREE = '''import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN = 6


class Block(nn.Module):
    """A submodule class of the reference: ModelNew needs it to build the same parameters."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, n))

    def forward(self, x):
        return torch.relu(self.proj(x)) + self.shift


class Model(nn.Module):
    def __init__(self, n_in: int) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(n_in, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN))
        self.heads = nn.ModuleDict({"main": nn.ModuleList([Block(HIDDEN), nn.LayerNorm(HIDDEN)]),
                                    "aux-1": nn.Linear(HIDDEN, HIDDEN)})
        self.norm = nn.BatchNorm1d(HIDDEN)
        self.norm.eval()  # running statistics, not batch statistics: the buffers are read
        self.norm.running_mean.uniform_(-0.5, 0.5)
        self.norm.running_var.uniform_(0.5, 1.5)
        self.shared = nn.Linear(HIDDEN, HIDDEN)
        self.again = self.shared  # one module under two names

    def forward(self, x):
        h = self.features(x)
        h = self.heads["main"][1](self.heads["main"][0](h))
        h = self.heads["aux-1"](h) * 0.5 + h
        h = self.norm(h)
        return self.again(torch.sigmoid(self.shared(h)))


def get_inputs():
    return [torch.randn(5, 7)]


def get_init_inputs():
    return [7]
'''


def test_attribute_expr_reads_each_kind_of_child() -> None:
    class Inner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(3))

    m = nn.Module()
    m.seq = nn.Sequential(nn.ReLU(), nn.Linear(2, 3))
    m.dict = nn.ModuleDict({"a-b": nn.ModuleList([Inner()]), "ok": Inner()})
    m.plist = nn.ParameterList([nn.Parameter(torch.randn(2))])
    m.add_module("7", Inner())  # a numeric attribute name on a plain module
    m.bn = nn.BatchNorm2d(3)
    cases = {"seq.1.weight": "self.seq[1].weight", "dict.a-b.0.w": "self.dict['a-b'][0].w",
             "dict.ok.w": "self.dict['ok'].w", "plist.0": "self.plist[0]", "7.w": "getattr(self, '7').w",
             "bn.running_mean": "self.bn.running_mean"}
    for path, want in cases.items():
        expr = attribute_expr(m, path)
        assert expr == want
        got = eval(expr, {}, {"self": m})  # the expression reads the same tensor as the dotted path
        assert got is (m.get_parameter(path) if "running" not in path else m.get_buffer(path))


def test_module_tree_names_are_python_a_reader_can_follow() -> None:
    problem = Problem.from_source(_TREE, name="module_tree")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0, device="cpu"))
    assert cand.source is not None, cand.note
    ast.parse(cand.source)  # the old emitter wrote `self.features.0.weight`: a SyntaxError
    for name in ("self.features[0].weight", "self.features[2].bias", "self.heads['main'][0].proj.weight",
                 "self.heads['main'][0].shift", "self.heads['aux-1'].weight", "self.norm.running_mean",
                 "self.norm.running_var"):
        assert name in cand.source, name
    assert "self.features.0" not in cand.source
    assert "class Block(nn.Module)" in cand.source  # the submodule class travels with ModelNew


@pytest.mark.slow
def test_module_tree_candidate_is_verified_on_the_interpreter() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem = Problem.from_source(_TREE, name="module_tree")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0, device="cpu"))
    assert cand.source is not None, cand.note
    result = evaluate(problem, cand.source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()


_REPEATED = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(n)
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return x + torch.relu(self.fc(self.norm(x)))


class Model(nn.Module):
    """Three copies of one block at one width, then a wider head: the copies share kernels, the head not."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block(n) for _ in range(3)])
        self.head = nn.Linear(n, 2 * n + 1)
        self.out = Block(2 * n + 1)

    def forward(self, x):
        return self.out(self.head(self.blocks(x)))


def get_inputs():
    return [torch.randn(5, 11, 13)]


def get_init_inputs():
    return [13]
'''


@pytest.mark.slow
def test_repeated_blocks_share_one_kernel_per_distinct_text_and_stay_correct() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem = Problem.from_source(_REPEATED, name="repeated_blocks")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=0, device="cpu"))
    assert cand.source is not None, cand.note
    launchers = re.findall(r"^        (?:\w+(?:, \w+)*) = (_\w+?_\d+)\(", cand.source, re.M)
    aliases = dict(re.findall(r"^(_\w+_\d+) = (_\w+_\d+)  # the same kernel", cand.source, re.M))
    kernels = re.findall(r"^def (_\w+)_kernel\(", cand.source, re.M)
    assert aliases, "three equal blocks: their kernels are written once"
    assert set(launchers) <= set(kernels) | set(aliases)
    assert all(a not in kernels and t in kernels for a, t in aliases.items())
    assert len(kernels) + len(aliases) == len(set(launchers))
    # the head block has other shapes: its kernels are its own
    head = [k for k in launchers[-3:]]
    assert not any(k in aliases for k in head)
    result = evaluate(problem, cand.source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()


_READS_VALUES = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rate = torch.linspace(0, 0.1, 4)[2].item()  # Swin's drop-path rates: cannot run on meta tensors
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(5, 1, 1)))
        self.register_buffer("order", torch.arange(5).flip(0))  # SwinV2's relative position index: values matter

    def forward(self, x):
        x = x[:, self.order]
        # SwinV2: a tensor made in forward on the default device, as a clamp bound
        scale = torch.clamp(self.logit_scale, max=torch.log(torch.tensor(1.0 / 0.01, device=x.device))).exp()
        return x * scale + self.rate


def get_inputs():
    return [torch.randn(3, 5, 7, 9)]


def get_init_inputs():
    return []
'''


def test_a_model_built_from_tensor_values_that_makes_a_tensor_in_forward_is_written_and_verified() -> None:
    """29_SwinMLP / 30_SwinTransformerV2's pattern (H200 2026-12-06: both invalid_problem): a constructor
    that reads tensor values, a buffer whose values index, a tensor made in forward; inspected after a CPU
    build, traced from one, verified."""
    from tritonsmith.evaluator import evaluate

    problem = Problem.from_source(_READS_VALUES, name="reads_values")
    assert [str(s) for s in problem.inspect().outputs] == ["float32[3, 5, 7, 9]"]
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1))
    assert cand.source is not None, cand.note
    result = evaluate(problem, cand.source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()
