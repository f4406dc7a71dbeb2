"""Feedback a model can act on: wrong outputs are described by their pattern, with the likely cause.

Each case is a realistic mistake run for real through the evaluator (Triton interpreter): a logsumexp
without the max subtraction (overflow), an output of the wrong shape, rows whose tail is never written,
and a grid that misses rows.
"""

from __future__ import annotations

import pytest

from tritonsmith.core.problem import Problem
from tritonsmith.evaluator import evaluate

LSE_REFERENCE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(23, 97) * 60.0]


def get_init_inputs():
    return []
'''

NAIVE_LSE = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _lse_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(out_ptr + row, tl.log(tl.sum(tl.exp(x), axis=0)))  # no max subtracted: exp overflows


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty(x.shape[0], 1, device=x.device, dtype=x.dtype)
        _lse_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
'''

SCALE_REFERENCE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(19, 129)]


def get_init_inputs():
    return []
'''

_SCALE_KERNEL = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask)
    tl.store(out_ptr + row * n_cols + cols, x * 2.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        _scale_kernel[(GRID,)](x, out, x.shape[1], BLOCK=BLOCK_SIZE)
        return RESULT
'''

ROW_TAIL = _SCALE_KERNEL.replace("GRID", "x.shape[0]").replace("BLOCK_SIZE", "64").replace("RESULT", "out")
MISSED_ROWS = (_SCALE_KERNEL.replace("GRID", "x.shape[0] // 2").replace("BLOCK_SIZE", "256")
               .replace("RESULT", "out"))
WRONG_SHAPE = (_SCALE_KERNEL.replace("GRID", "x.shape[0]").replace("BLOCK_SIZE", "256")
               .replace("RESULT", "out.reshape(-1)"))


def _feedback(reference: str, candidate: str) -> str:
    result = evaluate(Problem.from_source(reference, name="p"), candidate, device="cpu", trials=1)
    assert result.status.value == "wrong_output", result.feedback()
    return result.feedback()


def test_an_overflowing_logsumexp_is_diagnosed_as_overflow():
    text = _feedback(LSE_REFERENCE, NAIVE_LSE)
    assert "diagnosis: overflow" in text and "subtract the row maximum" in text
    assert "inputs: input 0: (23, 97) float32 in [" in text  # the inputs' range: |x| up to ~200
    assert "masks" not in text


def test_a_wrong_shape_is_named_a_shape_error():
    text = _feedback(SCALE_REFERENCE, WRONG_SHAPE)
    assert "shape (2451,) but the reference has (19, 129)" in text
    assert "diagnosis: a shape error, not a numerical one" in text
    assert "overflow" not in text and "masks" not in text


def test_rows_whose_tail_is_never_written():
    text = _feedback(SCALE_REFERENCE, ROW_TAIL)
    assert "zero 100%" in text and "rows 19/19, columns 65/129 (64..128)" in text
    assert "every row is wrong from column 64 on (of 129)" in text and "never written" in text


def test_a_grid_that_misses_rows():
    text = _feedback(SCALE_REFERENCE, MISSED_ROWS)
    assert "rows 10/19" in text and "only 10 of 19 rows are wrong (each entirely)" in text


@pytest.mark.parametrize("kind", ["dtype", "count"])
def test_structural_mismatches_get_their_own_diagnosis(kind):
    from tritonsmith.core._feedback import diagnose
    from tritonsmith.core.results import Mismatch

    (hint,) = diagnose(Mismatch(trial=1, output_index=0, message="m", kind=kind))
    assert (kind == "dtype") == ("dtype error" in hint) and (kind == "count") == ("as many outputs" in hint)
