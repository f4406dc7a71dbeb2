"""Recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) traced as one op each, kept as torch calls.

``torch.export`` would decompose them: a 6-layer LSTM over 512 steps became 64,617 graph nodes, and even
kept whole, the fake-tensor shape propagation of ``aten.lstm`` walks every step (36 s for a GRU). Before
export, :func:`patch_recurrent` routes each recurrent module's forward through the custom op
``tritonsmith_builtin::rnn``, whose fake implementation gives the output shapes at once; the lowering turns
it into a torch call of cuDNN's fused recurrence (hybrid policy) with the work around it in Triton.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tritonsmith.agents.builtin._ir import Node, UnsupportedError

if TYPE_CHECKING:
    from tritonsmith.agents.builtin._ir import Lowering as _Lowering

__all__ = ["patch_recurrent", "rnn_op", "lower_rnn"]


@torch.library.custom_op("tritonsmith_builtin::rnn", mutates_args=())
def rnn_op(kind: str, x: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor], has_biases: bool,
           num_layers: int, dropout: float, train: bool, bidirectional: bool, batch_first: bool,
           hidden: int, proj: int) -> list[torch.Tensor]:
    """``torch.{kind}`` (lstm, gru, rnn_tanh, rnn_relu) with zero initial states when ``hx`` is empty."""
    states = hx or _zero_states(kind, x, num_layers, bidirectional, batch_first, hidden, proj)
    state: Any = tuple(states) if kind == "lstm" else states[0]
    return [t.clone() for t in getattr(torch, kind)(x, state, params, has_biases, num_layers, dropout, train,
                                                    bidirectional, batch_first)]


@rnn_op.register_fake
def _rnn_fake(kind: str, x: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor], has_biases: bool,
              num_layers: int, dropout: float, train: bool, bidirectional: bool, batch_first: bool,
              hidden: int, proj: int) -> list[torch.Tensor]:
    dirs = 2 if bidirectional else 1
    seq, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    h_out = proj or hidden
    out_shape = (batch, seq, dirs * h_out) if batch_first else (seq, batch, dirs * h_out)
    outs = [x.new_empty(out_shape), x.new_empty((num_layers * dirs, batch, h_out))]
    if kind == "lstm":
        outs.append(x.new_empty((num_layers * dirs, batch, hidden)))
    return outs


def _zero_states(kind: str, x: torch.Tensor, num_layers: int, bidirectional: bool, batch_first: bool,
                 hidden: int, proj: int) -> list[torch.Tensor]:
    dirs = 2 if bidirectional else 1
    batch = x.shape[0] if batch_first else x.shape[1]
    states = [x.new_zeros((num_layers * dirs, batch, proj or hidden))]
    if kind == "lstm":
        states.append(x.new_zeros((num_layers * dirs, batch, hidden)))
    return states


def _kind(m: torch.nn.RNNBase) -> str:
    if m.mode == "LSTM":
        return "lstm"
    if m.mode == "GRU":
        return "gru"
    return "rnn_tanh" if m.mode == "RNN_TANH" else "rnn_relu"


def _forward(self: torch.nn.RNNBase, x: Any, hx: Any = None) -> Any:
    if not isinstance(x, torch.Tensor) or x.dim() != 3:  # packed or unbatched sequences: the module's own forward
        return type(self).forward(self, x, hx)
    kind = _kind(self)
    states = [] if hx is None else (list(hx) if isinstance(hx, (tuple, list)) else [hx])
    outs = rnn_op(kind, x, states, [getattr(self, n) for n in self._flat_weights_names], self.bias, self.num_layers, float(self.dropout),
                  self.training, self.bidirectional, self.batch_first, self.hidden_size, self.proj_size)
    return (outs[0], (outs[1], outs[2])) if kind == "lstm" else (outs[0], outs[1])


def patch_recurrent(model: torch.nn.Module) -> None:
    """Route every recurrent submodule of ``model`` (a fresh instance, traced once) through :func:`rnn_op`."""
    for m in model.modules():
        if isinstance(m, torch.nn.RNNBase):
            m.forward = types.MethodType(_forward, m)  # type: ignore[method-assign]


class _LazyOutputs:
    """The outputs of one recurrent call, each made a torch-call node only when used."""

    def __init__(self, make: Callable[[int], Node]) -> None:
        self._make, self._made = make, {}

    def __getitem__(self, i: int) -> Node:
        if i not in self._made:
            self._made[i] = self._make(i)
        return self._made[i]


def lower_rnn(lw: _Lowering, fx: Any, kind: str, x: Node, hx: Any, params: Any, has_biases: bool, num_layers: int,
              dropout: float, train: bool, bidirectional: bool, batch_first: bool, hidden: int,
              proj: int) -> _LazyOutputs:
    """One torch call of ``torch.{kind}``, the states and weights as arguments; a node per output used."""
    if dropout > 0 and train and num_layers > 1:
        raise UnsupportedError(f"{kind} with dropout {dropout} in training mode (random outputs)")
    nodes = (x, *hx, *params)
    if not all(isinstance(n, Node) for n in nodes):
        raise UnsupportedError(f"{kind} with a state or weight that is not a tensor")
    refs = [f"{{{i}}}" for i in range(len(nodes))]
    if hx:
        state = f"({refs[1]}, {refs[2]})" if kind == "lstm" else refs[1]
    else:  # zero initial states, as the module makes them
        dirs = 2 if bidirectional else 1
        batch = f"{refs[0]}.shape[{0 if batch_first else 1}]"  # the input's batch, whatever its size
        zeros = [f"{refs[0]}.new_zeros(({num_layers * dirs}, {batch}, {proj or hidden}))"]
        if kind == "lstm":
            zeros.append(f"{refs[0]}.new_zeros(({num_layers * dirs}, {batch}, {hidden}))")
        state = f"({', '.join(zeros)})" if kind == "lstm" else zeros[0]
    weights = f"[{', '.join(refs[1 + len(hx):])}]"
    call = (f"torch.{kind}({refs[0]}, {state}, {weights}, {has_biases}, {num_layers}, {float(dropout)}, {train}, "
            f"{bidirectional}, {batch_first})")
    vals = fx.meta["val"]
    # one call for all the outputs used: the emitter names its result once (``call_id``) and indexes it
    return _LazyOutputs(lambda i: lw.extern(call, nodes, vals[i], op=kind, call_id=fx.name, item=i))
