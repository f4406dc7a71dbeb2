"""The value types of a problem: its error, and what tracing it on the ``meta`` device finds.

They sit below ``problem`` and ``problem_meta`` so that both can use them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ProblemError", "ProblemInfo", "TensorSpec"]


class ProblemError(ValueError):
    """The reference problem itself is malformed (the user's input, not the candidate's fault)."""


@dataclass(frozen=True, kw_only=True)
class TensorSpec:
    """Shape and dtype of one tensor (or a note for a non-tensor value)."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __str__(self) -> str:
        return f"{self.dtype.removeprefix('torch.')}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True, kw_only=True)
class ProblemInfo:
    """What a problem looks like, found by running it on PyTorch's ``meta`` device (no data, no GPU)."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    init_inputs: tuple[Any, ...]
    parameters: tuple[tuple[str, TensorSpec], ...]
    flops: int | None
    ops: tuple[str, ...]

    @property
    def input_bytes(self) -> int:
        return sum(s.numel * _itemsize(s.dtype) for s in self.inputs)

    @property
    def output_bytes(self) -> int:
        return sum(s.numel * _itemsize(s.dtype) for s in self.outputs)

    @property
    def parameter_bytes(self) -> int:
        return sum(s.numel * _itemsize(s.dtype) for _, s in self.parameters)


def _itemsize(dtype: str) -> int:
    import torch

    return getattr(torch, dtype.removeprefix("torch."), torch.float32).itemsize
