"""Run a reference on PyTorch's ``meta`` device: shapes, FLOPs and ops without data or a GPU."""

from __future__ import annotations

import ast
import logging
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tritonsmith.core._problem_types import ProblemError, ProblemInfo, TensorSpec

if TYPE_CHECKING:
    from tritonsmith.core.problem import Problem

log = logging.getLogger(__name__)

_SCALAR_TYPES = (int, float, bool)
_MIN_SCALED = 8  # halving stops here: smaller sizes stop exercising masking and tiling


def exec_reference(source: str, name: str) -> types.ModuleType:
    """Execute reference source as a throwaway module (references hold no Triton kernels)."""
    module = types.ModuleType(f"_tritonsmith_ref_{name}")
    try:
        exec(compile(source, f"<reference {name}>", "exec"), module.__dict__)
    except Exception as exc:  # the user's reference failed: report it as such
        raise ProblemError(f"{name}: the reference raised while loading: {type(exc).__name__}: {exc}") from exc
    return module


def check_inputs(values: Any, what: str, name: str) -> list[Any]:
    """``get_inputs()`` must give a list of tensors and Python scalars."""
    import torch

    if not isinstance(values, (list, tuple)):
        raise ProblemError(f"{name}: {what}() must return a list, got {type(values).__name__}")
    for i, v in enumerate(values):
        if what == "get_inputs" and not isinstance(v, (torch.Tensor, *_SCALAR_TYPES)):
            raise ProblemError(
                f"{name}: get_inputs() item {i} is a {type(v).__name__}; inputs must be tensors (or int/float scalars)"
            )
    return list(values)


def instantiate(module: types.ModuleType, name: str, device: str,
                inputs_device: str | None = None) -> tuple[Any, list[Any], list[Any]]:
    """Build ``Model(*get_init_inputs())`` and the inputs with factories defaulting to ``device`` (the inputs
    to ``inputs_device`` when given)."""
    import torch

    with torch.device(device):
        try:
            init = check_inputs(module.get_init_inputs(), "get_init_inputs", name)
        except ProblemError:
            raise
        except Exception as exc:
            raise ProblemError(f"{name}: get_init_inputs() raised {type(exc).__name__}: {exc}") from exc
        inputs = reference_inputs(module, name, inputs_device or device)
        try:
            model = module.Model(*init)
        except Exception as exc:
            raise ProblemError(f"{name}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from exc
    return model.to(device), init, inputs


def instantiate_on_meta(module: types.ModuleType, name: str) -> tuple[Any, list[Any], list[Any]]:
    """``instantiate`` on the meta device (shapes only, no memory), for constructors that allow it.

    Some compute with their tensors' values (Swin's ``torch.linspace(0, rate, n)[i].item()`` drop-path
    rates), which meta tensors cannot: those are built on the CPU and the model moved to meta. A
    constructor that is broken raises its CPU error, the one its author would see.
    """
    try:
        return instantiate(module, name, "meta")
    except ProblemError as exc:
        log.info("%s cannot be built on the meta device (%s); building it on the CPU", name, exc)
    model, init, inputs = instantiate(module, name, "cpu", inputs_device="meta")
    return model.to("meta"), init, inputs


def reference_inputs(module: types.ModuleType, name: str, device: str) -> list[Any]:
    """``get_inputs()`` with tensor factories defaulting to ``device`` (no host-side build and copy)."""
    import torch

    with torch.device(device):
        try:
            values = check_inputs(module.get_inputs(), "get_inputs", name)
        except ProblemError:
            raise
        except Exception as exc:
            raise ProblemError(f"{name}: get_inputs() raised {type(exc).__name__}: {exc}") from exc
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def tensor_spec(x: Any) -> TensorSpec:
    return TensorSpec(shape=tuple(x.shape), dtype=str(x.dtype).removeprefix("torch."))


def flatten_outputs(out: Any) -> list[Any]:
    """Tensors of a forward's result in order (tuples, lists and dicts are flattened)."""
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten_outputs(o)]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in flatten_outputs(out[k])]
    return [out]


def inspect_problem(problem: Problem) -> ProblemInfo:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    module = exec_reference(problem.source, problem.name)
    model, init, inputs = instantiate_on_meta(module, problem.name)
    ops: list[str] = []
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter, _record_ops(ops):
            out = model(*inputs)
        flops: int | None = int(counter.get_total_flops())
    except Exception as exc:
        # Some ops have no meta kernel; shapes of the outputs are then unknown, but the rest is good.
        if isinstance(exc, (NotImplementedError, RuntimeError)):
            return ProblemInfo(inputs=_specs(inputs), outputs=(), init_inputs=tuple(init),
                               parameters=_params(model), flops=None, ops=tuple(ops))
        raise ProblemError(f"{problem.name}: the reference forward raised {type(exc).__name__}: {exc}") from exc
    outs = [o for o in flatten_outputs(out) if isinstance(o, torch.Tensor)]
    return ProblemInfo(inputs=_specs(inputs), outputs=tuple(tensor_spec(o) for o in outs), init_inputs=tuple(init),
                       parameters=_params(model), flops=flops, ops=tuple(ops))


def _specs(values: list[Any]) -> tuple[TensorSpec, ...]:
    import torch

    return tuple(tensor_spec(v) for v in values if isinstance(v, torch.Tensor))


def _params(model: Any) -> tuple[tuple[str, TensorSpec], ...]:
    named = list(model.named_parameters()) + list(model.named_buffers())
    return tuple((n, tensor_spec(p)) for n, p in named)


@contextmanager
def _record_ops(ops: list[str]) -> Iterator[None]:
    """Record the aten overloads a forward dispatches, in order, without duplicates in a row."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            name = str(func.overloadpacket.__name__)
            if (not ops or ops[-1] != name) and len(ops) < 4096:
                ops.append(name)
            return func(*args, **(kwargs or {}))

    with _Recorder():
        yield


def scale_problem(problem: Problem, *, max_elements: int, max_flops: int) -> Problem:
    """Halve size constants >= 2*_MIN_SCALED, biggest first, until the problem fits the budget."""
    tree = ast.parse(problem.source)
    slots = _size_slots(tree)
    original = {k: nodes[0].value for k, nodes in slots.items()}
    current = dict(original)
    last_error: Exception | None = None
    for _ in range(200):
        for key, nodes in slots.items():
            for node in nodes:
                node.value = current[key]
        candidate = problem.with_source(ast.unparse(tree) + "\n", _changes(original, current))
        try:
            if _fits(candidate.inspect(), max_elements, max_flops):
                return candidate if candidate.scaling else problem
        except ProblemError as exc:  # a halving broke a shape relation; keep halving the others
            last_error = exc
        shrinkable = {k: v for k, v in current.items() if v >= 2 * _MIN_SCALED}
        if not shrinkable:
            break
        biggest = max(shrinkable.values())
        current.update({k: _halve(v) for k, v in shrinkable.items() if v == biggest})
    why = f" (last error: {last_error})" if last_error else ""
    raise ProblemError(
        f"{problem.name}: cannot scale its size constants down to {max_elements} elements and "
        f"{max_flops} FLOPs{why}; write a smaller problem or evaluate it at full size on a GPU"
    )


def _size_slots(tree: ast.Module) -> dict[str, list[ast.Constant]]:
    """Integer literals that size the problem: module-level constants (``a = b = 256``, lists of
    ints) and literal arguments of calls inside ``get_inputs``."""
    slots: dict[str, list[ast.Constant]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            names = [t.id if isinstance(t, ast.Name) else "?" for t in node.targets[0].elts]
            if isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(names):
                node.value.elts = [_fold(e) for e in node.value.elts]
                for name, elt in zip(names, node.value.elts, strict=True):
                    if _is_int(elt):
                        slots[name] = [elt]  # type: ignore[list-item]
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            node.value = _fold(node.value)
            if _is_int(node.value):
                slots[name] = [node.value]  # type: ignore[list-item]
            elif isinstance(node.value, (ast.List, ast.Tuple)):
                node.value.elts = [_fold(e) for e in node.value.elts]
                for i, elt in enumerate(node.value.elts):
                    if _is_int(elt):
                        slots[f"{name}[{i}]"] = [elt]  # type: ignore[list-item]
        elif isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                for arg in call.args:
                    for elt in arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]:
                        if _is_int(elt):
                            slots[f"get_inputs:{elt.lineno}:{elt.col_offset}"] = [elt]  # type: ignore[list-item]
    return {k: v for k, v in slots.items() if v[0].value >= 2 * _MIN_SCALED}


def _fold(node: ast.expr) -> ast.expr:
    """``16384 * 4`` -> ``65536``: integer arithmetic on literals becomes one literal."""
    allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)
    if isinstance(node, (ast.BinOp, ast.UnaryOp)) and all(isinstance(n, allowed) for n in ast.walk(node)):
        value = eval(compile(ast.Expression(node), "<size>", "eval"), {"__builtins__": {}})  # literals only
        if type(value) is int:
            return ast.copy_location(ast.Constant(value), node)
    return node


def _halve(value: int) -> int:
    """Even sizes stay even (divisibility by groups, heads, strides survives); odd sizes stay odd."""
    return value // 2 if value % 2 == 0 else (value // 2) | 1


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _changes(original: dict[str, int], current: dict[str, int]) -> dict[str, tuple[int, int]] | None:
    changed = {k: (original[k], v) for k, v in current.items() if v != original[k]}
    return changed or None


def _fits(info: ProblemInfo, max_elements: int, max_flops: int) -> bool:
    sizes = [s.numel for s in info.inputs] + [s.numel for s in info.outputs] + [s.numel for _, s in info.parameters]
    return max(sizes, default=0) <= max_elements and (info.flops or 0) <= max_flops


CHECK_MAX_BYTES = 1 << 28  # larger references are not run on the CPU up front (seconds to minutes of eager work)
CHECK_MAX_FLOPS = 2 * 10**10


def check_reference(problem: Problem) -> float | None:
    """Run the reference once on the CPU on random inputs, as the evaluator's trials do, before anything is
    generated for it; raise :class:`ProblemError` with the evaluator's own message when it fails. Returns
    the forward's wall time in seconds, or None when the problem is too large to run on the CPU quickly
    (over :data:`CHECK_MAX_BYTES` moved or :data:`CHECK_MAX_FLOPS`): the first evaluation checks it then."""
    import time

    import torch


    info = problem.inspect()
    moved = info.input_bytes + info.output_bytes + info.parameter_bytes
    if moved > CHECK_MAX_BYTES or (info.flops or 0) > CHECK_MAX_FLOPS:
        return None
    module = exec_reference(problem.source, problem.name)
    torch.manual_seed(0)
    model, _, inputs = instantiate(module, problem.name, "cpu")
    start = time.perf_counter()
    try:
        with torch.no_grad():
            model(*inputs)
    except Exception as exc:
        raise ProblemError(f"{problem.name}: the reference forward raised {type(exc).__name__}: {exc}") from exc
    return time.perf_counter() - start
