"""Trace a KernelBench reference with ``torch.export`` and lower it to the generator's small graph.

Measured on the dev set (``benchmarks/builtin_generator.py --trace-only``, levels 1-2, meta device):
``torch.fx.symbolic_trace``, ``torch.export`` and dynamo each capture 100 of 100 references whole, so
coverage does not decide; ``torch.export`` is used because, with the core-ATen decompositions, it also
gives every value's shape and dtype, the parameter names (``graph_signature``) and a small op set.
"""

from __future__ import annotations

import keyword
import logging
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

import torch

from tritonsmith.agents.builtin._ir import EXTERN, INPUT, MM, PARAM, PW, REDUCE, VIEW, Graph, Node, UnsupportedError
from tritonsmith.core.problem import Problem

log = logging.getLogger(__name__)

__all__ = ["TracedProblem", "attribute_expr", "export_problem", "leading_size", "resize_leading", "trace_problem"]

aten = torch.ops.aten


class TracedProblem:
    """The lowered graph plus what the emitter needs to know about the reference module."""

    def __init__(self, graph: Graph, param_names: list[str], input_names: list[str]) -> None:
        self.graph = graph
        self.param_names = param_names
        self.input_names = input_names
        self.scalars: dict[int, Any] = {}  # position among forward args -> the value export baked in
        self.rewrites: list[str] = []  # the algebraic rewrites that fired (``_rewrite.py``), in order
        # each 2-D matmul's split-K chosen by ``_lower.split_k_for`` (0: none), in lowering order: the trace at
        # another leading size reuses them (options ``split_k_auto``), so a split never changes with that size
        self.split_k_auto: list[int] = []


Exported = tuple[Any, list[Any], dict[str, str]]


def export_problem(problem: Problem, lead: int | None = None, *, first_only: bool = False) -> Exported:
    """``torch.export`` the reference on the ``meta`` device (no data, no GPU).

    Returns (program, inputs, accessors): ``accessors`` maps every parameter and buffer path of the module
    tree (``features.3.weight``) to the Python expression that reads it from ``self``
    (``self.features[3].weight``). ``lead``: export with the inputs' leading dimension resized to it
    (``resize_leading``; ``first_only``: the first tensor input alone), to see which sizes follow it.
    """
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.core.problem_meta import exec_reference, instantiate

    from tritonsmith.agents.builtin._rnn import patch_recurrent

    module = exec_reference(problem.source, problem.name)
    try:
        model, _, inputs = instantiate(module, problem.name, "meta")
    except ProblemError as exc:
        # an __init__ that reads values (``.item()``): build and export it for real on the CPU; moved to meta
        # instead (``instantiate_on_meta``), tensors its forward creates on the default device would be
        # exported as constants of another device (30_SwinTransformerV2's ``torch.tensor(1 / 0.01)``)
        log.info("builtin: %s cannot be built on the meta device (%s); building it on the CPU", problem.name, exc)
        model, _, inputs = instantiate(module, problem.name, "cpu")
    patch_recurrent(model)
    if lead is not None:
        inputs = resize_leading(list(inputs), lead, first_only=first_only)
    program = _export(model, tuple(inputs))
    paths = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    paths += [n for n, _ in model.named_buffers(remove_duplicate=False)]
    return program, inputs, {p: attribute_expr(model, p) for p in paths}


def leading_size(inputs: list[Any]) -> int | None:
    """The first dimension of the first tensor input with one (the evaluator's ``generalize`` rule)."""
    return next((int(v.shape[0]) for v in inputs if isinstance(v, torch.Tensor) and v.dim() > 0), None)


def resize_leading(inputs: list[Any], size: int, *, first_only: bool = False) -> list[Any]:
    """``inputs`` with every tensor whose first dimension is the leading size resized to ``size`` along it,
    or with ``first_only`` the first such tensor alone (the tensors the evaluator's ``generalize`` check
    resizes, in its two modes); values are zeros (export reads no data)."""
    lead = leading_size(inputs)
    batched = [i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == lead]
    chosen = set(batched[:1] if first_only else batched)
    return [torch.zeros((size, *v.shape[1:]), dtype=v.dtype, device=v.device) if i in chosen else v
            for i, v in enumerate(inputs)]


def _export(model: torch.nn.Module, inputs: tuple[Any, ...]) -> Any:
    """``torch.export`` with the core-ATen decompositions. A forward that mutates a plain tensor attribute
    (a recurrent cell's ``self.hidden.copy_(h0)``) is refused by export as a mutated constant: such
    attributes are registered as non-persistent buffers and the export retried (a buffer mutation is
    allowed; what the outputs read of it is lowered like any value)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return torch.export.export(model, inputs).run_decompositions()
        except RuntimeError as exc:
            if "is mutated in the forward method" not in str(exc) or not _tensor_attributes_as_buffers(model):
                raise
        return torch.export.export(model, inputs).run_decompositions()


def _tensor_attributes_as_buffers(model: torch.nn.Module) -> bool:
    """Register every plain tensor attribute of the module tree as a non-persistent buffer; whether any was."""
    changed = False
    for m in model.modules():
        for name, value in list(vars(m).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                delattr(m, name)
                m.register_buffer(name, value, persistent=False)
                changed = True
    return changed


def attribute_expr(model: torch.nn.Module, path: str) -> str:
    """The expression that reads the dotted ``path`` from ``self``: items of ``Sequential``/``ModuleList``
    by index, of ``ModuleDict``/``ParameterDict`` by key, other names as attributes (``getattr`` when the
    name is not an identifier)."""
    expr, obj = "self", model
    for part in path.split("."):
        if isinstance(obj, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ParameterList)) and part.isdigit():
            expr += f"[{int(part)}]"
        elif isinstance(obj, (torch.nn.ModuleDict, torch.nn.ParameterDict)):
            expr += f"[{part!r}]"
        elif part.isidentifier() and not keyword.iskeyword(part):
            expr += f".{part}"
        else:
            expr = f"getattr({expr}, {part!r})"
        obj = obj[part] if isinstance(obj, (torch.nn.ModuleDict, torch.nn.ParameterDict)) else getattr(obj, part)
    return expr


def trace_problem(problem: Problem, options: dict[str, Any] | None = None,
                  exported: Exported | None = None) -> TracedProblem:
    """Export ``problem`` and lower it; raises :class:`UnsupportedError` naming the first op it cannot lower.

    ``options`` steer graph rewrites (``split_k``; ``no_rewrites`` turns the algebraic rewrites of
    ``_rewrite.py`` off); ``exported`` reuses an earlier export.
    """
    if exported is None:
        try:
            exported = export_problem(problem)
        except Exception as exc:  # export failures are the reference's limitation, reported to the caller
            raise UnsupportedError(f"torch.export could not trace the reference: {type(exc).__name__}: {exc}") from exc
    program, inputs, accessors = exported
    lw = _Lowering(program, inputs, options or {}, accessors=accessors,
                   constant_values=lambda: _constants_on_cpu(problem))
    traced = lw.run()
    if not lw.options.get("no_rewrites"):
        from tritonsmith.agents.builtin._rewrite import rewrite

        traced.rewrites = rewrite(lw)
    return traced


def _constants_on_cpu(problem: Problem) -> dict[str, Any]:
    """The tensor constants the forward creates, with their values.

    On the meta device ``torch.tensor(0.0, device=x.device)`` keeps no value; exporting the problem scaled
    down to a small size on the CPU gives the same graph with real constants (their values do not depend
    on the shapes). Empty when the problem cannot be scaled or exported that way.
    """
    from tritonsmith.core.problem_meta import exec_reference, instantiate
    from tritonsmith.agents.builtin._rnn import patch_recurrent
    from tritonsmith.core.problem import ProblemError

    try:
        small = problem.scaled()
        module = exec_reference(small.source, small.name)
        model, _, inputs = instantiate(module, small.name, "cpu")
        patch_recurrent(model)
        program = _export(model, tuple(inputs))
    except (ProblemError, RuntimeError, ValueError, TypeError) as exc:
        log.info("builtin: no CPU export of %s for its constants: %s", problem.name, exc)
        return {}
    return dict(program.constants)


class _Lowering:
    """Walks the exported FX graph, mapping each node to IR nodes (or tuples of them)."""

    def __init__(self, program: Any, inputs: list[Any], options: dict[str, Any], *,
                 accessors: dict[str, str] | None = None,
                 constant_values: Callable[[], dict[str, Any]] | None = None) -> None:
        self.program = program
        self.accessors = accessors or {}
        self.inputs = inputs
        self.options = options
        self._constant_values = constant_values
        self._cpu_constants: dict[str, Any] | None = None
        self.scalars: dict[int, Any] = {}
        self.g = Graph()
        self.env: dict[str, Any] = {}
        self.split_k_auto: list[int] = []

    def run(self) -> TracedProblem:
        sig = self.program.graph_signature
        to_param = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
        constants = getattr(sig, "inputs_to_lifted_tensor_constants", {}) or {}
        user_inputs = list(sig.user_inputs)
        tensor_inputs = [x for x in self.inputs if isinstance(x, torch.Tensor)]
        input_names = []
        live = _live_nodes(self.program.graph, len(sig.user_outputs))
        for fx in self.program.graph.nodes:
            if fx.op == "placeholder":
                val = fx.meta.get("val")
                if fx.name in to_param:
                    path = to_param[fx.name]
                    self.env[fx.name] = self._tensor(PARAM, val, name=self.accessors.get(path, _getter(path)))
                elif fx.name in constants:
                    self.env[fx.name] = self._constant(constants[fx.name])
                elif not isinstance(val, torch.Tensor):
                    self.env[fx.name] = val  # a Python scalar input: export specialized it (checked at run time)
                    self.scalars[len(self.g.inputs) + len(self.scalars)] = val
                elif fx.name in user_inputs:
                    node = self._tensor(INPUT, val, name=fx.name)
                    self.g.inputs.append(node)
                    input_names.append(fx.name)
                    self.env[fx.name] = node
                else:
                    raise UnsupportedError(f"unexpected graph input {fx.name}")
            elif fx.op == "call_function" and fx in live:
                self.env[fx.name] = self._call(fx)
            elif fx.op == "output":
                outs = fx.args[0]
                n_user = len(sig.user_outputs)
                for out in list(outs)[len(outs) - n_user:]:
                    value = self.env[out.name] if hasattr(out, "name") else out
                    if not isinstance(value, Node):
                        raise UnsupportedError("the reference returns a non-tensor value")
                    self.g.outputs.append(value)
        if len(tensor_inputs) != len(self.g.inputs):
            raise UnsupportedError("could not match the forward's tensor inputs")
        params = [n.name for n in self.g.nodes if n.kind == PARAM]
        traced = TracedProblem(self.g, params, input_names)
        traced.scalars = dict(self.scalars)
        traced.split_k_auto = list(self.split_k_auto)
        return traced

    def _constant(self, name: str) -> Any:
        value = self.program.constants.get(name)
        if isinstance(value, torch.Tensor) and value.device.type == "meta" and self._constant_values is not None:
            if self._cpu_constants is None:
                self._cpu_constants = self._constant_values()
            value = self._cpu_constants.get(name, value)
        if isinstance(value, torch.Tensor) and value.numel() == 1 and value.device.type != "meta":
            return value.item()
        raise UnsupportedError("the reference creates a tensor constant (other than a scalar) in forward")

    # -- node builders --------------------------------------------------------------------------
    def _tensor(self, kind: str, val: Any, *, name: str) -> Node:
        return self.g.add(Node(kind, tuple(val.shape), val.dtype, name=name, strides=tuple(val.stride()),
                               offset=int(val.storage_offset())))

    def pw(self, op: str, *args: Any, dtype: torch.dtype | None = None, **attrs: Any) -> Any:
        if args and not any(isinstance(a, Node) for a in args) and op in _FOLD:
            return _FOLD[op](*args)  # arithmetic on constants (``torch.log(torch.tensor(100.0))``): a number
        shapes = [a.shape for a in args if isinstance(a, Node)]
        shape = tuple(torch.broadcast_shapes(*shapes)) if shapes else ()
        if dtype is None:
            dtypes = [a.dtype for a in args if isinstance(a, Node)]
            floats = [d for d in dtypes if d.is_floating_point]
            dtype = floats[0] if floats else (dtypes[0] if dtypes else torch.float32)
            if not floats and any(isinstance(a, float) for a in args):
                dtype = torch.float32
        return self.g.add(Node(PW, shape, dtype, args=args, op=op, attrs=attrs))

    def reduce(self, op: str, x: Node, dims: list[int] | tuple[int, ...] | None, keepdim: bool) -> Node:
        nd = len(x.shape)
        dims_t = tuple(sorted({d % nd for d in dims})) if dims else tuple(range(nd))
        shape = tuple(1 if i in dims_t else s for i, s in enumerate(x.shape))
        dtype = torch.int64 if op.startswith("arg") else x.dtype
        node = self.g.add(Node(REDUCE, shape, dtype, args=(x,), op=op, dims=dims_t))
        if keepdim:
            return node
        return self.view(node, tuple(s for i, s in enumerate(x.shape) if i not in dims_t))

    def view(self, x: Node, shape: tuple[int, ...]) -> Node:
        shape = _resolve_shape(x.numel, shape)
        if shape == x.shape:
            return x
        if not _viewable(x, shape):  # e.g. attention's heads merged back after a transpose: copy first
            x = self.pw("cast", x, dtype=x.dtype)
        return self._view_like(x, shape, "reshape", lambda t: t.view(shape))

    def permute(self, x: Node, dims: list[int]) -> Node:
        dims = [d % len(x.shape) for d in dims]
        if dims == list(range(len(x.shape))):
            return x
        shape = tuple(x.shape[d] for d in dims)
        return self._view_like(x, shape, "permute", lambda t: t.permute(dims), perm=tuple(dims))

    def expand(self, x: Node, shape: tuple[int, ...]) -> Node:
        shape = tuple(x.shape[i - (len(shape) - len(x.shape))] if s == -1 else s for i, s in enumerate(shape))
        if shape == x.shape:
            return x
        return self._view_like(x, shape, "expand", lambda t: t.expand(shape))

    def _view_like(self, x: Node, shape: tuple[int, ...], how: str, fn: Callable[[Any], Any], **attrs: Any) -> Node:
        node = Node(VIEW, shape, x.dtype, args=(x,), attrs={"how": how, **attrs})
        if x.addressable:
            base = torch.empty_strided(x.shape, x.strides, device="meta", dtype=x.dtype)
            try:
                view = fn(base)
                node.strides, node.offset = tuple(view.stride()), x.offset + int(view.storage_offset())
            except RuntimeError:
                pass  # not expressible as strides: the partitioner materializes the input first
        return self.g.add(node)

    def mm(self, a: Node, b: Node) -> Node:
        shape = (*a.shape[:-1], b.shape[-1])
        return self.g.add(Node(MM, shape, a.dtype, args=(a, b)))

    def extern(self, call: str, args: tuple[Any, ...], val: Any, **attrs: Any) -> Node:
        return self.g.add(Node(EXTERN, tuple(val.shape), val.dtype, args=args, attrs={"call": call, **attrs},
                               strides=tuple(val.stride()), offset=0))

    # -- dispatch -------------------------------------------------------------------------------
    def _call(self, fx: Any) -> Any:
        from tritonsmith.agents.builtin._lower import LOWERINGS

        if fx.target is operator.getitem:
            return self.env[fx.args[0].name][fx.args[1]]
        fn = LOWERINGS.get(fx.target)
        if fn is None:
            raise UnsupportedError(f"no lowering for {fx.target}")
        args = [self._arg(a) for a in fx.args]
        kwargs = {k: self._arg(v) for k, v in fx.kwargs.items()}
        return fn(self, fx, *args, **kwargs)

    def _arg(self, a: Any) -> Any:
        if hasattr(a, "op") and hasattr(a, "name") and a.name in self.env:
            return self.env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(x) for x in a)
        return a


_FOLD: dict[str, Callable[..., Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv, "neg": operator.neg,
    "log": math.log, "exp": math.exp, "sqrt": math.sqrt, "reciprocal": lambda x: 1.0 / x,
    "rsqrt": lambda x: 1.0 / math.sqrt(x)}


def _viewable(x: Node, shape: tuple[int, ...]) -> bool:
    """Whether ``x`` (a chain of views over a tensor in memory: an input, a torch call's output, or a value
    a kernel stores contiguously) can be reshaped to ``shape`` without a copy."""
    from tritonsmith.agents.builtin._partition import apply_view

    chain, a = [], x
    while a.kind == VIEW:
        chain.append(a)
        a = a.args[0]
    if not chain:
        return True
    strides = a.strides if a.addressable and a.strides is not None else None
    t = torch.empty_strided(a.shape, strides, device="meta") if strides else torch.empty(a.shape, device="meta")
    try:
        for v in reversed(chain):
            t = apply_view(t, v)
        t.view(shape)
    except RuntimeError:
        return False
    return True


def _getter(path: str) -> str:
    """An expression for a parameter/buffer path without the module tree at hand (always valid Python)."""
    if all(p.isidentifier() and not keyword.iskeyword(p) for p in path.split(".")):
        return f"self.{path}"
    head, _, leaf = path.rpartition(".")
    owner = f"self.get_submodule({head!r})" if head else "self"
    return f"getattr({owner}, {leaf!r})"


def _live_nodes(graph: Any, n_user_outputs: int) -> set[Any]:
    """FX nodes the user outputs depend on (buffer updates of batch norm are not computed)."""
    out = next(n for n in graph.nodes if n.op == "output")
    outs = list(out.args[0])
    stack = [o for o in outs[len(outs) - n_user_outputs:] if hasattr(o, "op")]
    live: set[Any] = set()
    while stack:
        n = stack.pop()
        if n in live:
            continue
        live.add(n)
        stack.extend(n.all_input_nodes)
    return live


def _resolve_shape(total: int, shape: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    shape = [int(s) for s in shape]
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape[shape.index(-1)] = total // known
    return tuple(shape)

