"""Index expressions of the kernel writers (``_exprs``)."""

from __future__ import annotations

import itertools

import torch

from tritonsmith.agents.builtin._exprs import offset_expr, offset_text


def _evaluate(text: str, lin: torch.Tensor, lead: int) -> torch.Tensor:
    return eval(text, {}, {"lin": lin, "lead": lead})  # the kernel text, run on integer tensors


def test_offset_text_with_a_run_time_size_matches_the_strided_address_at_any_leading_size() -> None:
    """A view moved the leading size to dimension 1 (attention's ``[2, N, 32]``): the offsets of a contiguous
    batched tensor, a broadcast bias and a transposed read, at several leading sizes, against torch's own."""
    for lead in (3, 5, 8):
        shape = (2, 4 * lead, 3)
        lin = torch.arange(2 * 4 * lead * 3)
        idx = torch.stack(torch.unravel_index(lin, shape), dim=1)
        cases = {  # sizes and strides as kernel text -> the same strides with the run-time size put in
            ((2, "lead * 4", 3), ("lead * 12", 3, 1)): (12 * lead, 3, 1),
            ((2, "lead * 4", 3), (0, 0, 1)): (0, 0, 1),
            ((2, "lead * 4", 3), (1, 0, 2)): (1, 0, 2),
            ((2, "lead * 4", 3), (0, 1, 0)): (0, 1, 0),
        }
        for (sizes, strides), real in cases.items():
            want = (idx * torch.tensor(real)).sum(dim=1) + 7
            got = _evaluate(offset_text("lin", sizes, strides, 7), lin, lead)
            assert torch.equal(got, want), (sizes, strides, lead)


def test_offset_text_with_literal_sizes_agrees_with_offset_expr() -> None:
    lin = torch.arange(5 * 1 * 6 * 4)
    for strides in itertools.product((0, 1, 24), (0, 7), (0, 4, 1), (0, 1, 30)):
        expected = torch.as_tensor(_evaluate(offset_expr("lin", (5, 1, 6, 4), strides, 3), lin, 0)).expand_as(lin)
        got = torch.as_tensor(_evaluate(offset_text("lin", (5, 1, 6, 4), strides, 3), lin, 0)).expand_as(lin)
        assert torch.equal(got, expected), strides
