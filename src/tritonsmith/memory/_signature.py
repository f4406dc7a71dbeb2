"""The normalized operator signature of a problem, and the text a record is embedded from.

A signature is what two problems share when the same kernel design fits both: the traced aten op
sequence (from :meth:`Problem.inspect`, on the ``meta`` device), the input/output shape classes
(dtype, rank and a size bucket, never exact sizes) and the modules/functions the source calls.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import re
from dataclasses import dataclass
from functools import lru_cache

from tritonsmith.core.problem import Problem, ProblemError, TensorSpec

__all__ = ["ProblemSignature", "problem_key", "normalize_source", "problem_signature", "retrieval_text"]

log = logging.getLogger(__name__)

_OPS_LINE = "#ops:"
_SHAPES_LINE = "#shapes:"
_KERNEL_MARK = "#kernel:"
_TAGS_LINE = "#tags:"
_MAX_OPS = 256  # a full network traces thousands of ops; the head says what it is made of


@dataclass(frozen=True, kw_only=True)
class ProblemSignature:
    """What a problem computes, independent of its exact sizes and formatting."""

    ops: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    traced: bool

    @property
    def text(self) -> str:
        """One line, stable across processes: ``ops=a,b,c | in=f32[2d:M] | out=f32[2d:M]``."""
        return f"ops={','.join(self.ops)} | in={' '.join(self.inputs)} | out={' '.join(self.outputs)}"

    @classmethod
    def from_text(cls, text: str) -> ProblemSignature:
        parts = dict(p.split("=", 1) for p in text.split(" | ") if "=" in p)
        ops = tuple(o for o in parts.get("ops", "").split(",") if o)
        return cls(ops=ops, inputs=tuple(parts.get("in", "").split()), outputs=tuple(parts.get("out", "").split()),
                   traced=bool(ops))


def shape_class(spec: TensorSpec) -> str:
    """``float32[128, 4096]`` -> ``f32[2d:L]``: dtype, rank and a size bucket (S < 64K <= M < 4M <= L)."""
    dtype = spec.dtype.removeprefix("torch.")
    short = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
             "int32": "i32", "bool": "b"}.get(dtype, dtype)
    n = spec.numel
    bucket = "S" if n < 1 << 16 else "M" if n < 1 << 22 else "L"
    return f"{short}[{len(spec.shape)}d:{bucket}]"


def problem_signature(problem: Problem) -> ProblemSignature:
    """Trace ``problem`` on the meta device; fall back to the calls its source makes if tracing fails."""
    return _signature_cached(problem.source, problem.name)


@lru_cache(maxsize=512)
def _signature_cached(source: str, name: str) -> ProblemSignature:
    try:
        info = Problem.from_source(source, name=name).inspect()
    except ProblemError as exc:
        log.info("signature of %s from its source only (tracing failed: %s)", name, exc)
        return ProblemSignature(ops=source_calls(source)[:_MAX_OPS], inputs=(), outputs=(), traced=False)
    ops = tuple(_canonical_op(o) for o in info.ops[:_MAX_OPS])
    return ProblemSignature(ops=ops, inputs=tuple(shape_class(s) for s in info.inputs),
                            outputs=tuple(shape_class(s) for s in info.outputs), traced=True)


def _canonical_op(op: str) -> str:
    """In-place and out variants do the same math: ``relu_`` -> ``relu``."""
    return op.rstrip("_") or op


_CALL = re.compile(r"(?:\bnn\.|\bF\.|\btorch\.|\bfunctional\.|\.)([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def source_calls(source: str) -> tuple[str, ...]:
    """Modules and functions a source calls (``nn.Conv2d(`` -> ``conv2d``), in order, lower case."""
    return tuple(m.group(1).lower() for m in _CALL.finditer(source))


def normalize_source(source: str) -> str:
    """Source with comments, docstrings and formatting removed, so trivially different copies compare equal."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        lines = (re.sub(r"#.*", "", line).rstrip() for line in source.splitlines())
        return "\n".join(line for line in lines if line.strip())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.unparse(tree)


@lru_cache(maxsize=8192)
def problem_key(source: str) -> str:
    """Identity of a problem: a hash of its normalized source."""
    return hashlib.sha256(normalize_source(source).encode()).hexdigest()[:24]


def retrieval_text(signature: ProblemSignature | None, problem_source: str, kernel_source: str | None = None,
                   *, tags: tuple[str, ...] = (), max_chars: int = 12_000) -> str:
    """The text an embedder sees: ``#ops:``, ``#shapes:`` and ``#tags:`` lines, the problem, then the kernel."""
    head = [f"{_TAGS_LINE} {' '.join(tags)}"] if tags else []
    if signature is not None:
        head.append(f"{_OPS_LINE} {' '.join(signature.ops)}")
        head.append(f"{_SHAPES_LINE} {' '.join(signature.inputs)} -> {' '.join(signature.outputs)}")
    body = problem_source[:max_chars]
    if kernel_source:
        body += f"\n{_KERNEL_MARK}\n{kernel_source[:max_chars]}"
    return "\n".join([*head, body])


def split_retrieval_text(text: str) -> tuple[list[str], list[str], str, str, list[str]]:
    """Inverse of :func:`retrieval_text`: (ops, shape classes, problem part, kernel part, tags).

    Free text (a query typed by a person or a model) has no ``#`` lines and is all problem part.
    """
    tags: list[str] = []
    ops: list[str] = []
    shapes: list[str] = []
    rest: list[str] = []
    kernel = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(_TAGS_LINE):
            tags = line[len(_TAGS_LINE):].split()
        elif line.startswith(_OPS_LINE):
            ops = line[len(_OPS_LINE):].split()
        elif line.startswith(_SHAPES_LINE):
            shapes = [s for s in line[len(_SHAPES_LINE):].split() if s != "->"]
        elif line.strip() == _KERNEL_MARK:
            kernel = "\n".join(lines[i + 1:])
            break
        else:
            rest.append(line)
    return ops, shapes, "\n".join(rest), kernel, tags
