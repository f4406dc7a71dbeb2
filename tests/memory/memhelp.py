"""Helpers of the memory tests: small problems written for them, quick record builders."""

from __future__ import annotations

import time

from tritonsmith.memory import (
    Evaluation,
    KernelRecord,
    Lineage,
    RecordKind,
    record_id,
)
from tritonsmith.core.problem import Problem

SOFTMAX = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x * 1.5, dim=-1)


def get_inputs():
    return [torch.randn(37, 129)]


def get_init_inputs():
    return []
'''

CONV_RELU = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)) * 0.5


def get_inputs():
    return [torch.randn(3, 5, 17, 19)]


def get_init_inputs():
    return [5, 7]
'''

GEMM_GELU = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x))


def get_inputs():
    return [torch.randn(33, 65)]


def get_init_inputs():
    return [65, 31]
'''

PROBLEMS = {"softmax": SOFTMAX, "conv_relu": CONV_RELU, "gemm_gelu": GEMM_GELU}


def kernel_text(tag: str, variant: int = 0) -> str:
    return f"import triton\n\n\n@triton.jit\ndef _{tag}_kernel(x_ptr):\n    pass  # {tag}\n\n\nVARIANT = {variant}\n"


def make_record(
    name: str = "softmax",
    variant: int = 0,
    *,
    kind: RecordKind = RecordKind.SUCCESS,
    speedup: float | None = None,
    device_name: str = "CPU (Triton interpreter, x86_64)",
    generator: str = "test",
    level: int | None = None,
) -> KernelRecord:
    """A record built by hand; the signature is traced once per problem (cached)."""
    from tritonsmith.memory import problem_signature

    problem = Problem.from_source(PROBLEMS[name], name=name)
    kernel = kernel_text(name, variant)
    ev = Evaluation(status="correct" if kind is RecordKind.SUCCESS else "wrong_output", tolerance="kernelbench",
                    device="cuda" if speedup else "cpu", device_name=device_name, speedup_vs_eager=speedup,
                    error=None if kind is RecordKind.SUCCESS else "output 0 mismatched")
    return KernelRecord(id=record_id(problem.source, kernel), kind=kind, problem_name=name,
                        problem_source=problem.source, signature=problem_signature(problem).text,
                        kernel_source=kernel, evaluation=ev, problem_level=level,
                        lineage=Lineage(generator=generator, iteration=variant), created_at=time.time())
