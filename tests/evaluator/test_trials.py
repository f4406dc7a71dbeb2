"""The decorative-kernel criterion (``_trials._reproduces``): what the output looks like without kernels."""

from __future__ import annotations

import torch

from tritonsmith.evaluator._trials import _reproduces


def test_an_output_torch_computed_alone_reproduces_the_reference():
    g = torch.Generator().manual_seed(2)
    ref, other = torch.randn(37, 41, generator=g), torch.randn(37, 41, generator=g)
    assert _reproduces(ref.clone(), ref, other) is True
    assert _reproduces(ref * (1 + 1e-6), ref, other) is True


def test_unwritten_or_stale_outputs_do_not_reproduce_it():
    g = torch.Generator().manual_seed(4)
    # a softmax over many columns: every value ~1/n, far inside kernelbench's atol of 1e-4
    ref = torch.softmax(torch.randn(5, 40000, generator=g), dim=1)
    other = torch.softmax(torch.randn(5, 40000, generator=g), dim=1)
    assert _reproduces(torch.zeros_like(ref), ref, other) is False  # fresh memory: zeros
    assert _reproduces(other.clone(), ref, other) is False  # stale memory: another input's answer
    assert _reproduces(torch.full_like(ref, float("nan")), ref, other) is False
    assert _reproduces(ref[:, :-1], ref, other) is False


def test_outputs_that_do_not_depend_on_the_inputs_give_no_signal():
    const = torch.full((9, 3), 0.5)
    assert _reproduces(const.clone(), const, const + 1e-9) is None
    ints = torch.arange(11)
    assert _reproduces(ints.clone(), ints, ints.clone()) is None
    assert _reproduces(ints.clone(), ints, ints.flip(0)) is True
