"""Recurrent layers (LSTM, GRU, RNN) stay torch calls (hybrid), traced as one op each so that tracing is
quick; the work around them (a linear head, activations) is written in Triton and checked through the
evaluator on the Triton interpreter."""

from __future__ import annotations

import time

import pytest

from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.core.problem import Problem

_LSTM_HEAD = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_in, hidden, layers, n_out):
        super().__init__()
        self.lstm = nn.LSTM(n_in, hidden, layers, batch_first=True)
        self.gru = nn.GRU(hidden, hidden, 1)
        self.fc = nn.Linear(hidden, n_out)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        seq, _ = self.gru(out.transpose(0, 1))  # no initial state: zeros
        return torch.tanh(self.fc(seq[-1])) + c[-1].sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(3, 7, 5), torch.rand(2, 3, 6), torch.rand(2, 3, 6)]


def get_init_inputs():
    return [5, 6, 2, 4]
'''

_LONG_GRU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(128, 256, 6, bidirectional=True)

    def forward(self, x, h0):
        _, h_n = self.gru(x, h0)
        return h_n


def get_inputs():
    return [torch.rand(512, 10, 128), torch.rand(12, 10, 256)]


def get_init_inputs():
    return []
'''


def test_recurrent_only_model_is_no_code_naming_the_op_quickly() -> None:
    """A 6-layer bidirectional GRU over 512 steps: decomposed, it took minutes to trace before saying no."""
    start = time.perf_counter()
    cand = BuiltinGenerator().generate(GenerationRequest(problem=Problem.from_source(_LONG_GRU, name="gru"),
                                                         iteration=1, device="cpu"))
    assert time.perf_counter() - start < 20
    assert cand.source is None and cand.error is None and "gru" in cand.note


@pytest.mark.slow
def test_lstm_and_gru_stay_torch_calls_with_triton_around_them() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem = Problem.from_source(_LSTM_HEAD, name="lstm_head")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert cand.source is not None, cand.note
    assert "hybrid: torch ops remain: lstm, gru" in cand.note
    assert "torch.lstm(" in cand.source and "torch.gru(" in cand.source
    result = evaluate(problem, cand.source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()


_CELL_STATE = '''import torch
import torch.nn as nn

batch = 5


class Model(nn.Module):
    """A recurrent cell that keeps its hidden state as a plain tensor attribute and overwrites it in forward
    (KernelBench's vanilla RNN): torch.export refuses the mutated constant unless it becomes a buffer."""

    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.hidden = torch.randn((batch, hidden))
        self.i2h = nn.Linear(n_in + hidden, hidden)
        self.h2o = nn.Linear(hidden, n_out)

    def forward(self, x, initial_hidden=None):
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = torch.tanh(self.i2h(combined))
        return self.h2o(self.hidden)


def get_inputs():
    return [torch.rand(batch, 7), torch.rand(batch, 9)]


def get_init_inputs():
    return [7, 9, 3]
'''

_RANDOM_STATES = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Random initial states drawn in forward, optional arguments not passed by get_inputs: after 96 steps
    the output no longer depends on the draws (the forget gates have erased them)."""

    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.hidden = hidden
        self.lstm = nn.LSTM(n_in, hidden, 2, batch_first=True)
        self.fc = nn.Linear(hidden, n_out)

    def forward(self, x, h0=None, c0=None):
        if h0 is None:
            h0 = torch.randn(2, x.size(0), self.hidden, device=x.device)
        if c0 is None:
            c0 = torch.randn(2, x.size(0), self.hidden, device=x.device)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.rand(3, 96, 5)]


def get_init_inputs():
    return [5, 6, 4]
'''


def test_cell_mutating_a_tensor_attribute_is_written_and_correct() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem = Problem.from_source(_CELL_STATE, name="cell_state")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert cand.source is not None, cand.note
    assert "torch ops remain" not in cand.note  # cat, both GEMMs and tanh are Triton
    result = evaluate(problem, cand.source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()


def test_random_initial_states_stay_torch_calls_and_unpassed_arguments_keep_defaults() -> None:
    from tritonsmith.evaluator._evaluate import evaluate

    problem = Problem.from_source(_RANDOM_STATES, name="random_states")
    cand = BuiltinGenerator().generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    assert cand.source is not None, cand.note
    assert "hybrid: torch ops remain: randn, randn, lstm" in cand.note
    assert "def forward(self, x, h0=None, c0=None):" in cand.source
    result = evaluate(problem, cand.source, device="cpu", trials=2, timeout_s=300)
    assert result.status.value == "correct", result.feedback()
