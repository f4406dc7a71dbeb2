"""Assemble the candidate module: imports, kernels, launchers and ``ModelNew``."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from typing import Any

from tritonsmith.agents.builtin._convcl import TO_CHANNELS_LAST
from tritonsmith.agents.builtin._exprs import HELPERS
from tritonsmith.agents.builtin._ir import EXTERN, INPUT, PARAM, VIEW, Node, UnsupportedError
from tritonsmith.agents.builtin._kernelbase import KernelSource
from tritonsmith.agents.builtin._kernels import kernel_for
from tritonsmith.agents.builtin._partition import TORCH, Plan, resolve_base
from tritonsmith.agents.builtin._shapes import NotGeneric
from tritonsmith.agents.builtin._trace import TracedProblem
from tritonsmith.agents.builtin._variants import group_config

__all__ = ["emit_module"]

_HEADER = '''"""Triton kernels for {name}, written by tritonsmith's built-in generator (no LLM).

Variant: {variant}
{hybrid}Kernels were generated for the reference's shapes; the launchers check them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
'''

_STATIC = "Kernels were generated for the reference's shapes; the launchers check them."
# Shape-generic modules (``Plan.lead``): the launchers read the leading size from their inputs.
_GENERIC = "Kernels take the leading (batch) dimension at run time; the launchers check every other size."

_EXPECT_GENERIC = '''

def _lead(t: torch.Tensor, per: int, limit: int, what: str) -> int:
    """The leading (batch) size of this call: ``t``'s first dimension is ``per`` times it, at most ``limit``
    (the largest size the kernels index without overflow)."""
    n = t.shape[0] if t.dim() else 0
    if n < per or n % per:
        raise ValueError(f"{what}: expected a first dimension that is a positive multiple of {per}, got shape "
                         f"{tuple(t.shape)}")
    if n // per > limit:
        raise ValueError(f"{what}: leading size {n // per} is larger than {limit}, the most these kernels index")
    return n // per


def _expect(t: torch.Tensor, shape: tuple, strides: tuple, what: str) -> None:
    """The kernels take the leading size at run time; every other size and stride is the one seen when they
    were generated: check them."""
    if tuple(t.shape) != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {tuple(t.shape)} (only the leading dimension may "
                         "change)")
    if any(s != e for s, e, n in zip(t.stride(), strides, shape) if n > 1):
        raise ValueError(f"{what}: expected strides {strides}, got {tuple(t.stride())}")
'''

_EXPECT = '''

def _expect(t: torch.Tensor, shape: tuple, strides: tuple, what: str) -> None:
    """The kernels index with the shapes and strides seen when they were generated: check them."""
    if tuple(t.shape) != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {tuple(t.shape)} (kernels are shape-specialized)")
    if any(s != e for s, e, n in zip(t.stride(), strides, shape) if n > 1):
        raise ValueError(f"{what}: expected strides {strides}, got {tuple(t.stride())}")
'''


def emit_module(problem_name: str, source: str, traced: TracedProblem, plan: Plan, cfgs: dict[str, dict[str, Any]],
                variant: str) -> str:
    """The full candidate source. ``cfgs`` maps a group kind to its launch configuration.

    Shape-generic where ``plan.lead`` is set; where a kernel of this configuration cannot take the leading
    size at run time (``NotGeneric``), the whole module is written for the reference's shapes instead and
    ``plan`` records why (``lead`` None, ``static_reason``)."""
    if plan.lead is not None:
        try:
            return _emit(problem_name, source, traced, plan, cfgs, variant)
        except NotGeneric as exc:
            plan.lead, plan.static_reason = None, str(exc)
    return _emit(problem_name, source, traced, plan, cfgs, variant)


def _emit(problem_name: str, source: str, traced: TracedProblem, plan: Plan, cfgs: dict[str, dict[str, Any]],
          variant: str) -> str:
    kernels: dict[int, KernelSource] = {}
    counters: dict[str, int] = {}
    for g in plan.groups:
        if g.kind == TORCH:
            continue
        i = counters.get(g.kind, 0)
        counters[g.kind] = i + 1
        kernels[g.index] = kernel_for(plan, g, f"_{g.kind}_{i}", group_config(g, cfgs.get(g.kind, {})))
    helpers = sorted({h for k in kernels.values() for h in k.helpers})
    hybrid = ""
    if plan.torch_ops:
        hybrid = (f"Hybrid: these ops stay torch calls (no Triton kernel for them here): "
                  f"{', '.join(plan.torch_ops)}; the elementwise work after them is fused into Triton.\n")
    header = _HEADER.format(name=problem_name, variant=variant, hybrid=hybrid)
    if plan.lead is not None:
        header = header.replace(_STATIC, _GENERIC)
    elif plan.static_reason:  # a user reading the module learns why no other batch size is taken
        why = f"{_STATIC[:-1]}: the leading (batch) dimension cannot change at run time here " \
              f"({_header_text(plan.static_reason)})."
        header = header.replace(_STATIC, textwrap.fill(why, width=110, break_long_words=False, break_on_hyphens=False))
    parts = [header, _EXPECT_GENERIC if plan.lead is not None else _EXPECT]
    parts += ["\n\n" + HELPERS[h] for h in helpers]
    if any(g.kind == TORCH and g.nodes[0].attrs.get("channels_last") for g in plan.groups):  # conv-cl, net-cl
        parts.append(TO_CHANNELS_LAST)
    first: dict[str, str] = {}  # a kernel's text up to names and comments -> the launcher written for it
    for k in kernels.values():
        key = _canonical(k)
        if key in first:  # a repeated block of a whole model: one compile instead of one per copy
            parts.append(f"\n\n{k.name} = {first[key]}  # the same kernel and launcher as {first[key]}\n")
            continue
        first[key] = k.name
        parts += ["\n\n" + k.kernel, "\n\n" + k.launcher]
    parts.append("\n\n" + _model_class(source, traced, plan, kernels))
    return "".join(parts)


def _header_text(reason: str, limit: int = 300) -> str:
    """``reason`` as text inside the module's docstring: no backslash or quotes that end it, at most ``limit``
    characters (a torch error quoted in full can run to several lines)."""
    text = " ".join(reason.replace("\\", "/").replace('"', "'").split())
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def _canonical(k: KernelSource) -> str:
    """The kernel and launcher text without what differs between copies of one block of a model: the
    kernel's name, docstrings, comments, and the node numbers in variable names (``v12``, ``acc12``, ``c12``,
    ``sel12_0``: renumbered in order of first appearance, one number for one node, so two texts are equal
    only when one is the other with its variables renamed)."""
    text = re.sub(rf"\b{re.escape(k.name)}(?=(_\w*)?\b)", "K", k.kernel + "\n" + k.launcher)  # and _stats0_kernel
    text = re.sub(r'"""[\s\S]*?"""', "", text)
    text = re.sub(r"#[^\n]*", "", text)
    ids: dict[str, str] = {}
    return re.sub(r"\b(acc|sel|c|i|p|r|s|t|v|x)(\d+)(?=_|\b)",
                  lambda m: m.group(1) + ids.setdefault(m.group(2), str(len(ids))), text)


def _model_class(source: str, traced: TracedProblem, plan: Plan, kernels: dict[int, KernelSource]) -> str:
    tree = ast.parse(source)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if cls is None:
        raise UnsupportedError("the reference defines no class Model")
    fwd = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if fwd is None:
        raise UnsupportedError("Model has no forward method")
    keep = [n for n in cls.body if n is not fwd and not _is_docstring(n)]
    body = "\n\n".join(_indent(ast.get_source_segment(source, n, padded=True) or "", n) for n in keep)
    body = re.sub(r"super\(\s*Model\s*,\s*self\s*\)", "super()", body)
    globals_needed = _module_globals(tree, keep)
    arg_names = [a.arg for a in fwd.args.args[1:]]
    forward = _forward(arg_names, traced, plan, kernels, _unpassed_defaults(fwd, traced))
    head = "".join(g + "\n" for g in globals_needed)
    return (f"{head}{'' if not head else chr(10)}class ModelNew(nn.Module):\n"
            '    """Same parameters as the reference Model (same names, same initialization order); the\n'
            '    forward runs the Triton kernels above."""\n\n'
            f"{body}\n\n{forward}")


def _is_docstring(n: ast.stmt) -> bool:
    return isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)


def _indent(seg: str, n: ast.stmt) -> str:
    lines = seg.splitlines()
    if not lines:
        return ""
    pad = " " * n.col_offset
    return "\n".join(("    " + line[len(pad):]) if line.startswith(pad) else "    " + line.lstrip() for line in lines)


_NOT_COPIED = {"Model", "get_inputs", "get_init_inputs"}


def _module_globals(tree: ast.Module, nodes: list[ast.stmt]) -> list[str]:
    """The module-level definitions the copied ``__init__`` needs, transitively, in source order: size
    constants, helper functions, imports, and the reference's submodule classes (``DenseBlock``...)
    without their ``forward`` (ModelNew's forward runs the kernels instead; they only build parameters)."""
    defined: dict[int, set[str]] = {}
    for i, stmt in enumerate(tree.body):
        names = _defines(stmt) - _NOT_COPIED
        if names:
            defined[i] = names
    chosen: set[int] = set()
    used = _loads(nodes)
    while True:
        more = {i for i, names in defined.items() if i not in chosen and names & used}
        if not more:
            break
        chosen |= more
        used |= _loads([tree.body[i] for i in more])
    return [_copy_stmt(tree.body[i]) for i in sorted(chosen)]


def _defines(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names} - {"torch", "nn", "F", "triton", "tl"}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _loads(nodes: list[ast.stmt]) -> set[str]:
    """Names the statements read, less each function's own parameters."""
    used = {n.id for s in nodes for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used - {a.arg for s in nodes for n in ast.walk(s) if isinstance(n, ast.arguments)
                   for a in (*n.posonlyargs, *n.args, *n.kwonlyargs)}


def _copy_stmt(stmt: ast.stmt) -> str:
    if not isinstance(stmt, ast.ClassDef):
        return ast.unparse(stmt)
    cls = ast.ClassDef(name=stmt.name, bases=stmt.bases, keywords=stmt.keywords, decorator_list=stmt.decorator_list,
                       type_params=getattr(stmt, "type_params", []),
                       body=[b for b in stmt.body if not (isinstance(b, ast.FunctionDef) and b.name == "forward")])
    if len(cls.body) < len(stmt.body):
        note = f"The reference's {stmt.name}, without its forward: it builds parameters; ModelNew.forward computes."
        cls.body = [ast.Expr(ast.Constant(note)), *[b for b in cls.body if not _is_docstring(b)]]
    return ast.unparse(ast.fix_missing_locations(cls)) + "\n"


def _unpassed_defaults(fwd: ast.FunctionDef, traced: TracedProblem) -> dict[str, str]:
    """The forward's trailing parameters that get_inputs() does not pass (``h0=None``): name -> default, as
    Python text. The kernels were traced with those defaults."""
    params = fwd.args.args[1:]
    passed = len(traced.graph.inputs) + len(traced.scalars)
    defaults = dict(zip([a.arg for a in params[len(params) - len(fwd.args.defaults):]], fwd.args.defaults,
                        strict=True))
    return {a.arg: ast.unparse(defaults[a.arg]) for a in params[passed:] if a.arg in defaults}


def _forward(arg_names: list[str], traced: TracedProblem, plan: Plan, kernels: dict[int, KernelSource],
             unpassed: dict[str, str] | None = None) -> str:
    names: dict[int, str] = {}
    unpassed = unpassed or {}
    passed = [a for a in arg_names if a not in unpassed]
    tensor_args = [a for i, a in enumerate(passed) if i not in traced.scalars]
    if len(tensor_args) != len(traced.graph.inputs) or passed != arg_names[:len(passed)]:
        raise UnsupportedError("could not match the forward's arguments to its tensor inputs")
    for node, arg in zip(traced.graph.inputs, tensor_args, strict=True):
        names[node.id] = arg
    params = [*passed, *(f"{a}={d}" for a, d in unpassed.items())]
    lines = [f"    def forward(self, {', '.join(params)}):"]
    for arg, default in unpassed.items():  # traced with the default: another value would need other kernels
        lines.append(f"        if {arg} is not {default}:" if default == "None" else f"        if {arg} != {default}:")
        lines.append(f"            raise ValueError('kernels were generated for {arg}={default}')")
    for pos, value in traced.scalars.items():
        if pos < len(arg_names):
            lines.append(f"        if {arg_names[pos]} != {value!r}:  # export baked this scalar input in")
            lines.append(f"            raise ValueError('kernels were generated for {arg_names[pos]}={value!r}')")

    def expr(a: Node) -> str:
        if a.kind == PARAM:
            return a.name
        if a.id in names:
            return names[a.id]
        if a.kind == VIEW and a.id not in plan.owner:
            src = expr(a.args[0])
            how = a.attrs["how"]
            if how == "permute":
                return f"{src}.permute{a.attrs['perm']}"
            if how == "select":
                return f"{src}.select({a.attrs['dim']}, {a.attrs['index']})"
            if how == "slice":
                cut = [":"] * a.attrs["dim"] + [f"{a.attrs['start']}:{a.attrs['end']}:{a.attrs['step']}"]
                return f"{src}[{', '.join(cut)}]"
            return f"{src}.{'expand' if how == 'expand' else 'view'}({_view_shape(a, plan)})"
        raise UnsupportedError(f"internal error: {a} is not available in forward")

    shared: dict[str, str] = {}  # a torch call with several outputs (an LSTM's): its result's name
    copies: set[int] = set()  # values a channels-last copy was made of (net-cl)
    for g in plan.groups:
        if g.kind == TORCH:
            n = g.nodes[0]
            args = [expr(a) for a in n.args if isinstance(a, Node)]
            if n.attrs.get("cl_input"):  # net-cl: one channels-last copy of a value however many convs read it
                x = n.args[0]
                if x.id not in copies:
                    lines.append(f"        cl{x.id} = _to_channels_last({args[0]})")
                    copies.add(x.id)
                args[0] = f"cl{x.id}"
            call = n.attrs["call"].format(*args, **({"size": _drawn_size(n, plan, expr)} if "size" in n.attrs else {}))
            names[n.id] = f"t{n.id}"
            if "call_id" in n.attrs:
                if n.attrs["call_id"] not in shared:
                    shared[n.attrs["call_id"]] = f"r{n.id}"
                    lines.append(f"        r{n.id} = {call}  # torch: {n.attrs.get('op', 'call')}")
                # the kernels read it with the traced (contiguous) strides; torch.lstm on the CPU returns a
                # batch-first output as a transposed view: .contiguous() is free when it already is
                call = f"{shared[n.attrs['call_id']]}[{n.attrs['item']}].contiguous()"
                lines.append(f"        t{n.id} = {call}")
                continue
            lines.append(f"        t{n.id} = {call}  # torch: {n.attrs.get('op', 'call')}")
            continue
        k = kernels[g.index]
        outs = [f"t{o.id}" for o in k.outputs]
        call_args = [expr(b) for b in k.bases]
        if not call_args:  # a kernel of constants reads no tensor: it is told the forward's device
            if not tensor_args:
                raise UnsupportedError(f"{k.name} computes constants and the forward has no tensor input")
            call_args = [f"{tensor_args[0]}.device"]
        lines.append(f"        {', '.join(outs)} = {k.name}({', '.join(call_args)})")
        for o in k.outputs:
            names[o.id] = f"t{o.id}"
    rets = [expr(o) if o.id in names or o.kind in (PARAM, INPUT, EXTERN) or o.kind == VIEW else
            expr(resolve_base(o, plan.owner)) for o in traced.graph.outputs]
    lines.append(f"        return {rets[0] if len(rets) == 1 else '(' + ', '.join(rets) + ')'}")
    return "\n".join(lines) + "\n"


def _drawn_size(n: Node, plan: Plan, expr: Callable[[Node], str]) -> str:
    """The size of a random tensor drawn in forward (an LSTM's initial states, ``[layers, batch, hidden]``):
    the reference's, or with the run-time leading size where it follows it, read off an input whose first
    dimension is ``c * lead``."""
    size, lead = n.attrs["size"], plan.lead
    if lead is None or not lead.batched(n):
        return str(tuple(size))
    x = lead.sized_input(plan.graph.inputs)
    if x is None:
        raise NotGeneric(f"a random tensor of size {list(size)} follows the leading size, and no input shows it")
    d, per_x = lead.dim(n), lead.scale[x.id]
    lead_text = f"{expr(x)}.shape[0]" if per_x == 1 else f"{expr(x)}.shape[0] // {per_x}"
    c = lead.scale[n.id]
    items = [(lead_text if c == 1 else f"{c} * {lead_text}") if i == d else str(v) for i, v in enumerate(size)]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _view_shape(a: Node, plan: Plan) -> str:
    """The shape of a view the forward takes: the reference's, or with ``-1`` first where it follows the
    leading size (a reshape infers it; an expand keeps the source's)."""
    lead = plan.lead
    if lead is None or not lead.batched(a):
        return str(tuple(a.shape))
    d = lead.dim(a)
    if a.attrs["how"] == "expand" and not (lead.batched(a.args[0]) and a.args[0].shape[0] == a.shape[0]):
        raise NotGeneric(f"the forward expands a value to the leading size ({list(a.shape)})")
    if a.attrs["how"] == "expand" and d:
        raise NotGeneric(f"the forward expands a value whose dimension {d} follows the leading size")
    return str(tuple(-1 if i == d else v for i, v in enumerate(a.shape)))
