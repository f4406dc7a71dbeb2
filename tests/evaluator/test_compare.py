"""The tolerance comparison runs a chunk at a time: the verdict must not depend on the chunk size."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tritonsmith.evaluator import _compare
from tritonsmith.evaluator._compare import compare


def _pair(shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(shape, generator=g) + 0.5
    out = ref + 1e-6 * torch.randn(shape, generator=g)
    return out, ref


def _same(a: object, b: object) -> bool:
    """Equal, with floats equal to 1e-9 (chunked sums add in another order) and NaN equal to NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, nan_ok=True)
    return a == b


def _verdicts(monkeypatch: pytest.MonkeyPatch, out: torch.Tensor, ref: torch.Tensor, **kw: object) -> tuple:
    whole = compare(out, ref, **kw)
    monkeypatch.setattr(_compare, "_CHUNK", 7)  # many chunks, the last one partial
    chunked = compare(out, ref, **kw)
    return dataclasses.asdict(whole), dataclasses.asdict(chunked)


@pytest.mark.parametrize("policy", ["kernelbench", "numerics"])
@pytest.mark.parametrize("shape", [(37,), (5, 7, 11), (3, 29, 13)])
def test_a_chunked_comparison_gives_the_whole_tensors_verdict(policy, shape, monkeypatch):
    out, ref = _pair(shape, seed=len(shape))
    out.view(-1)[3::23] += 0.25  # mismatches spread over several chunks
    out.view(-1)[11] = float("nan")
    whole, chunked = _verdicts(monkeypatch, out, ref, policy=policy, ref64=ref.double() + 1e-8)
    assert not whole["ok"]
    assert whole["details"]["mismatched"] == len(range(3, out.numel(), 23)) + (11 % 23 != 3)
    assert whole["details"]["first_bad_index"] == tuple(int(i) for i in torch.unravel_index(torch.tensor(3), shape))
    assert _same(whole, chunked)


@pytest.mark.parametrize("policy", ["kernelbench", "numerics"])
def test_a_correct_output_passes_in_chunks_too(policy, monkeypatch):
    out, ref = _pair((9, 31), seed=7)
    whole, chunked = _verdicts(monkeypatch, out, ref, policy=policy, ref64=ref.double())
    assert whole["ok"] and chunked["ok"]
    assert _same(whole, chunked)


def test_the_mismatch_pattern_counts_across_chunks(monkeypatch):
    out, ref = _pair((6, 17), seed=3)
    out[:, 4] = 0.0  # a whole column of zeros: 6 rows, one column, all mismatches are 0
    whole, chunked = _verdicts(monkeypatch, out, ref, policy="kernelbench")
    pattern = chunked["details"]["pattern"]
    assert pattern["zero"] == 1.0 and pattern["constant"] == 0.0
    assert pattern["rows"] == [6, 6] and pattern["cols"] == [1, 17] and pattern["first_col"] == 4
    assert _same(whole, chunked)


def test_integer_and_bool_outputs_compare_exactly_in_chunks(monkeypatch):
    ref = torch.randint(-3, 9, (4, 19), generator=torch.Generator().manual_seed(5))
    out = ref.clone()
    out[2, 13] += 1
    whole, chunked = _verdicts(monkeypatch, out, ref, policy="kernelbench")
    assert not whole["ok"] and whole["details"]["first_bad_index"] == (2, 13)
    assert _same(whole, chunked)
    flags = ref > 2
    whole, chunked = _verdicts(monkeypatch, flags.clone(), flags, policy="kernelbench")
    assert whole["ok"] and _same(whole, chunked)
