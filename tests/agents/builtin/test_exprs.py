"""Index expressions of the kernel writers (``_exprs``)."""

from __future__ import annotations

import itertools
import re

import torch

from tritonsmith.agents.builtin._exprs import Digits, offset_expr, offset_text
from tritonsmith.agents.builtin._kernelbase import row_digits
from tritonsmith.agents.builtin._partition import row_domain


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


def _digits_of(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[Digits, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``Digits`` a row kernel over ``shape`` reduced along ``dims`` has (``row_digits``), and every element's
    ``k``, ``r`` and row-major index ``lin`` (its runs' place values, computed here on tensors)."""
    dom = row_domain(shape, dims)

    def part(v: torch.Tensor, runs: tuple[tuple[int, int], ...]) -> torch.Tensor:
        if not runs:
            return torch.zeros_like(v)
        if len(runs) == 1:
            return v * runs[0][1]
        (_, s0), (n1, s1) = runs
        return (v // n1) * s0 + (v % n1) * s1

    k, r = torch.meshgrid(torch.arange(dom.k), torch.arange(dom.r), indexing="ij")
    return row_digits(dom, True), k, r, part(k, dom.kept_runs) + part(r, dom.red_runs)


def test_digits_of_a_row_index_match_dividing_it_for_every_element() -> None:
    """``(lin // lo) % size`` from the runs' coordinates equals the division of ``lin`` itself for every element,
    at every bound that splits the shape at dimension boundaries and at every other bound; a bound between
    digits (``(lin // 3) % 15`` of rows of 60 read across batches) falls back (None), never a wrong digit."""
    for shape, dims in [((6, 5, 7, 3), (1, 3)), ((4, 6, 10), (0,)), ((3, 4, 5, 6), (2, 3)), ((3, 4, 5, 6), (0, 1)),
                        ((2, 3, 4, 5), (0, 2)), ((5, 9, 4, 4), (0, 2, 3)), ((7, 11), (1,))]:
        digits, k, r, lin = _digits_of(shape, dims)
        total = lin.numel()
        bounds = [(lo, size) for lo in range(1, total + 1) for size in [None, *range(1, total // lo + 2)]]
        exact = 0
        for lo, size in bounds:
            got = digits.of(lo, size)
            if got is None:
                continue
            text, row_only = got
            value = eval(text, {}, {"k": k, "r": r})  # the kernel text, run on integer tensors
            want = lin // lo if size is None else (lin // lo) % size
            assert torch.equal(torch.as_tensor(value).expand_as(want), want), (shape, dims, lo, size, text)
            assert not row_only or not re.search(r"\br\b", text), text
            exact += 1
        assert exact >= len(shape), (shape, dims)  # at least the dimensions' own digits are written without lin
    bn, _, _, _ = _digits_of((10, 192, 224, 224), (0, 2, 3))
    assert bn.of(224 * 224, 192) == ("k", True)  # BatchNorm's channel: the row itself
    assert bn.of(192 * 224 * 224, None) == ("(r // 50176)", False)
    assert _digits_of((4, 6, 10), (0,))[0].of(3, 15) is None


def test_a_digit_inside_a_run_sized_at_run_time_is_left_to_lin() -> None:
    """Where the outermost run follows the leading size, a remainder inside it is refused; a quotient is not."""
    digits = Digits(((50, 1, "(r % 50)", False), (4, 50, "k", True), (10, 200, "(r // 50)", False)), top_fixed=False)
    assert digits.of(200, 5) is None
    assert digits.of(200, None) == ("(r // 50)", False)
    assert digits.of(50, 4) == ("k", True)
