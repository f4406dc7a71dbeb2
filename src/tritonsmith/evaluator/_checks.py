"""Static checks on a candidate's source (its AST, never a regex over text or comments).

A candidate must compute with Triton kernels launched from ``ModelNew.forward`` and leave the
evaluator alone. The checks follow calls from ``forward`` through module-level helpers, launchers,
classes and ``self.<attr>`` objects built in ``__init__``, so a kernel launched by a helper counts and
a kernel that is only defined does not.

Policies (``policy=``):

* ``hybrid`` (the default, as in KernelBench, which scores partial replacement): PyTorch may keep
  operations that have no kernel yet — e.g. ``self.conv = nn.Conv2d(...)`` followed by a fused Triton
  epilogue. Each such operation is reported in ``ChecksReport.torch_ops``; at run time the candidate is
  rejected when PyTorch runs *every* compute operation of the reference (the Triton part is then
  decoration).
* ``strict``: all compute in Triton; PyTorch only allocates, views, copies and casts.

Every finding is a :class:`Violation` with a stable ``rule`` and a message the model can act on.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from tritonsmith.core.results import TorchOpUse, Violation
from tritonsmith.core.contract import DEFAULT_POLICY, POLICIES  # stated once, in the contract
from tritonsmith.evaluator._rules import rule as known_rule


_KERNEL_DECORATORS = {"jit", "autotune", "heuristics"}
# torch functions that allocate, reshape, copy or describe: glue a launcher needs, never "the work".
GLUE_TORCH = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "arange", "tensor", "as_tensor", "as_strided", "from_numpy", "is_tensor", "is_floating_point", "is_complex",
    "numel", "device", "dtype", "finfo", "iinfo", "Size", "no_grad", "inference_mode", "enable_grad",
    "set_grad_enabled", "manual_seed", "get_default_dtype", "broadcast_shapes", "result_type", "promote_types",
    "cat", "concat", "concatenate", "stack", "split", "chunk", "unbind", "narrow", "reshape", "permute",
    "transpose", "squeeze", "unsqueeze", "flatten", "unflatten", "view_as_real", "view_as_complex",
    "empty_permuted", "contiguous_format", "channels_last", "float32", "float16", "bfloat16", "float64",
    "int32", "int64", "int8", "uint8", "bool", "long", "float", "half", "Tensor", "Generator",
    "get_device", "is_grad_enabled", "typename", "is_autocast_enabled",
})
# Tensor methods that do real work (method calls not in this set are treated as glue).
TENSOR_COMPUTE_METHODS = frozenset({
    "matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "dot", "einsum", "softmax", "log_softmax", "exp", "log",
    "sum", "mean", "var", "std", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "norm", "cumsum",
    "cumprod", "relu", "sigmoid", "tanh", "gelu", "silu", "sqrt", "rsqrt", "pow", "abs", "clamp", "clip",
    "logsumexp", "sort", "topk", "conv2d", "layer_norm", "softplus", "erf", "sin", "cos", "tril", "triu",
    "mul", "add", "sub", "div", "addcmul", "addcdiv", "maximum", "minimum", "where", "masked_fill", "sign",
    "exp2", "log1p", "expm1", "reciprocal", "hardtanh", "leaky_relu", "elu", "selu", "mish",
})
_NN_CONTAINERS = frozenset({
    "Module", "ModuleList", "ModuleDict", "Parameter", "ParameterList", "ParameterDict", "Identity", "Buffer",
})
_STREAM_API = frozenset({"Stream", "stream", "set_stream", "ExternalStream", "StreamContext", "Event.wait"})
_PRECISION_CALLS = {"torch.set_float32_matmul_precision", "torch.backends.cuda.matmul.allow_tf32",
                    "torch.backends.cudnn.allow_tf32"}
# module prefix -> (rule, why)
_FORBIDDEN_MODULES: dict[str, tuple[str, str]] = {
    **{m: ("threads", "starts threads: work on another thread escapes the timer")
       for m in ("threading", "_thread", "concurrent", "asyncio")},
    **{m: ("processes", "starts or signals processes") for m in ("subprocess", "multiprocessing",
                                                                  "torch.multiprocessing", "pty", "signal")},
    **{m: ("network", "uses the network") for m in ("socket", "ssl", "urllib", "http", "requests", "httpx",
                                                   "aiohttp", "ftplib", "smtplib", "telnetlib", "xmlrpc",
                                                   "websocket", "websockets", "paramiko")},
    **{m: ("evaluator_access", "reads or writes files (the evaluator's spec and results live there)")
       for m in ("pathlib", "glob", "shutil", "tempfile", "fileinput", "io")},
    **{m: ("introspection", "inspects or rewrites the running interpreter (where the evaluator lives)")
       for m in ("gc", "inspect", "ctypes", "cffi", "builtins", "traceback", "sys._getframe", "sys.modules",
                 "sys.settrace", "sys.setprofile", "torch._C", "torch.utils._python_dispatch", "torch.ops",
                 "torch.overrides", "torch.profiler", "torch.autograd.profiler", "torch.cuda.profiler",
                 "tritonsmith")},
    **{m: ("dynamic_code", "builds code at run time, which these checks cannot read")
       for m in ("importlib", "marshal", "pickle", "types.FunctionType", "types.CodeType", "runpy")},
    **{m: ("not_triton", "generates kernels with something other than your Triton code")
       for m in ("torch.compile", "torch._dynamo", "torch._inductor", "torch.jit", "torch.cuda.jiterator",
                 "torch.utils.cpp_extension", "torch.export", "cupy", "numba", "pycuda", "cuda")},
}
_OS_RULES: dict[str, tuple[str, str]] = {
    **{f"os.{n}": ("evaluator_access", "reads the evaluator's environment or files")
       for n in ("environ", "environb", "getenv", "putenv", "unsetenv", "listdir", "scandir", "walk", "open",
                 "read", "remove", "unlink", "rename", "replace", "chdir", "getcwd")},
    **{f"os.{n}": ("processes", "starts or signals processes")
       for n in ("fork", "forkpty", "system", "popen", "spawnl", "spawnv", "spawnve", "spawnlp", "execv",
                 "execve", "execl", "execvp", "posix_spawn", "posix_spawnp", "kill", "killpg", "getppid")},
    "sys.argv": ("evaluator_access", "reads the evaluator's command line"),
    "sys.stdin": ("evaluator_access", "reads the evaluator's input"),
}
_BUILTIN_RULES: dict[str, tuple[str, str]] = {
    "open": ("evaluator_access", "opens a file (the evaluator's spec and results live there)"),
    "exec": ("dynamic_code", "runs code built at run time"),
    "eval": ("dynamic_code", "runs code built at run time"),
    "compile": ("dynamic_code", "compiles code at run time"),
    "__import__": ("dynamic_code", "imports a module by a computed name"),
    "breakpoint": ("dynamic_code", "enters a debugger"),
}
_INTROSPECTION_ATTRS = frozenset({
    "tb_frame", "f_back", "f_locals", "f_globals", "f_builtins", "gi_frame", "cr_frame", "__globals__",
    "__closure__", "__subclasses__", "__builtins__", "__traceback__", "__code__", "__kwdefaults__",
    "__defaults__",
})
_EVALUATOR_STRINGS = ("/proc/", "spec.json", "result.json", "stage.txt", "worker.log", "tritonsmith")


@dataclass
class StaticReport:
    """What the static checks found; ``tf32_lines`` are ``tl.dot`` calls asking for tf32 inputs."""

    violations: list[Violation] = field(default_factory=list)
    torch_ops: list[TorchOpUse] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)
    tf32_lines: list[int] = field(default_factory=list)

    def add(self, rule: str, message: str, node: ast.AST | None = None) -> None:
        known_rule(rule)  # an unregistered rule name is our bug
        line = getattr(node, "lineno", None)
        text = f"line {line}: {message}" if line else message
        if not any(v.rule == rule and v.line == line for v in self.violations):
            self.violations.append(Violation(rule=rule, message=text, line=line))


def check_source(source: str, *, policy: str = DEFAULT_POLICY, reference_source: str | None = None) -> StaticReport:
    """Read a candidate's source and report the rules it breaks and the PyTorch ops it computes with.

    A source that does not parse gives an empty report: the worker reports the syntax error with its line.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return StaticReport()
    mod = _ModuleInfo(tree)
    report = StaticReport(kernels=sorted(mod.kernels))
    _check_everywhere(mod, report)
    model_new = mod.classes.get("ModelNew")
    if model_new is None:
        return report  # the worker says "defines no class ModelNew"
    _check_reference_use(mod, model_new, reference_source, report)
    reach = _Reach(mod, model_new)
    _check_kernels(mod, reach, report)
    _check_fallbacks(mod, report)
    _collect_torch_ops(mod, reach, report)
    if policy == "strict":
        for op in report.torch_ops:
            report.add("torch_compute", f"`{op.op}` computes in PyTorch; the strict policy wants all compute in "
                       "Triton (PyTorch may only allocate, view, copy and cast)", _Line(op.line))
    report.violations.sort(key=lambda v: v.line or 0)
    return report


class _Line(ast.AST):
    def __init__(self, line: int | None) -> None:
        super().__init__()
        self.lineno = line


class _ModuleInfo:
    """Imports, functions, classes, kernels and module-level assignments of one candidate module."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.aliases: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.assigns: dict[str, list[ast.expr]] = {}
        self.kernels: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
                if any(self._is_kernel_decorator(d) for d in node.decorator_list):
                    self.kernels.add(node.name)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for name in _target_names(t):
                        self.assigns.setdefault(name, []).append(node.value)
                        if isinstance(node.value, ast.Call) and self._is_kernel_decorator(node.value.func):
                            self.kernels.add(name)

    def resolve(self, node: ast.AST) -> str | None:
        """Dotted path of a name or attribute chain with import aliases expanded (``F.relu`` -> torch.nn.functional.relu)."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Call):
            return None
        if not isinstance(node, ast.Name):
            return None
        root = self.aliases.get(node.id, node.id)
        return ".".join([root, *reversed(parts)])

    def is_module_path(self, node: ast.AST) -> bool:
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in self.aliases

    def _is_kernel_decorator(self, node: ast.AST) -> bool:
        target = node.func if isinstance(node, ast.Call) else node
        path = self.resolve(target) or ""
        return path.startswith("triton") and path.rsplit(".", 1)[-1] in _KERNEL_DECORATORS


def _target_names(t: ast.expr) -> Iterator[str]:
    if isinstance(t, ast.Name):
        yield t.id
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _target_names(e)


class _Reach:
    """Functions (not kernels) and names reachable from ``ModelNew.forward``."""

    def __init__(self, mod: _ModuleInfo, model_new: ast.ClassDef) -> None:
        self.mod = mod
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = []
        self.names: set[str] = set()
        self.self_attrs: dict[str, list[ast.expr]] = {}
        self.layer_attrs: dict[str, str] = {}
        self._seen: set[int] = set()
        classes = self._class_chain(model_new)
        self.methods = {n.name: n for c in reversed(classes) for n in c.body
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for c in classes:
            self._collect_self_attrs(c)
        forward = self.methods.get("forward")
        if forward is not None:
            self._walk([forward])

    def _class_chain(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        chain, todo = [], [cls]
        while todo:
            c = todo.pop()
            if c in chain:
                continue
            chain.append(c)
            todo += [self.mod.classes[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in self.mod.classes]
        return chain

    def _collect_self_attrs(self, cls: ast.ClassDef) -> None:
        for node in ast.walk(cls):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        self.self_attrs.setdefault(t.attr, []).append(node.value)
                        layer = self._nn_layer(node.value)
                        if layer:
                            self.layer_attrs[t.attr] = layer

    def _nn_layer(self, value: ast.expr) -> str | None:
        if not isinstance(value, ast.Call):
            return None
        path = self.mod.resolve(value.func) or ""
        if path.startswith("torch.nn.") and path.count(".") == 2:
            name = path.rsplit(".", 1)[-1]
            return None if name in _NN_CONTAINERS else f"nn.{name}"
        return None

    def _walk(self, todo: list[ast.AST]) -> None:
        while todo:
            fn = todo.pop()
            key = id(fn.value) if isinstance(fn, _Wrap) else id(fn)  # tree nodes outlive the walk; wrappers do not
            if key in self._seen:
                continue
            self._seen.add(key)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self.functions.append(fn)
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    todo += self._follow_name(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                    if node.attr in self.methods:
                        todo.append(self.methods[node.attr])
                    todo += [_Wrap(v) for v in self.self_attrs.get(node.attr, [])]

    def _follow_name(self, name: str) -> list[ast.AST]:
        if name in self.names:
            return []
        self.names.add(name)
        mod = self.mod
        if name in mod.kernels:
            return []
        if name in mod.functions:
            return [mod.functions[name]]
        if name in mod.classes:
            return [n for n in ast.walk(mod.classes[name]) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return [_Wrap(v) for v in mod.assigns.get(name, [])]


class _Wrap(ast.AST):
    """An expression walked for the names it mentions (not a function of its own)."""

    _fields = ("value",)

    def __init__(self, value: ast.expr) -> None:
        super().__init__()
        self.value = value


def _check_kernels(mod: _ModuleInfo, reach: _Reach, report: StaticReport) -> None:
    if not mod.kernels:
        report.add("no_triton_kernel", "the candidate defines no @triton.jit kernel; ModelNew.forward must compute "
                   "with Triton kernels")
        return
    report.launched = sorted(k for k in mod.kernels if k in reach.names)
    if not report.launched:
        names = ", ".join(sorted(mod.kernels))
        report.add("kernel_not_launched", f"the Triton kernel(s) {names} are defined but never launched from "
                   "ModelNew.forward (directly or through a helper it calls)")


def _check_reference_use(mod: _ModuleInfo, model_new: ast.ClassDef, reference_source: str | None,
                         report: StaticReport) -> None:
    for base in model_new.bases:
        if isinstance(base, ast.Name) and base.id == "Model":
            report.add("reference_model", "ModelNew subclasses the reference Model; it must implement forward with "
                       "its own Triton kernels", base)
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Name) and node.id == "Model" and isinstance(node.ctx, ast.Load):
            report.add("reference_model", "uses the reference `Model`; ModelNew must not call or wrap it", node)
        elif isinstance(node, ast.Attribute) and node.attr == "Model" and not mod.is_module_path(node):
            report.add("reference_model", "uses a `Model` attribute (the reference); ModelNew must not call or wrap it",
                       node)
        elif isinstance(node, ast.ClassDef) and node.name == "Model":
            report.add("reference_model", "defines its own `Model` class (a copy of the reference)", node)
    ref_forward = _reference_forward(reference_source)
    if ref_forward is None:
        return
    for node in ast.walk(mod.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _body_dump(node) == ref_forward:
            report.add("reference_model", f"`{node.name}` is a copy of the reference Model.forward: it runs the "
                       "reference's PyTorch code instead of a Triton implementation", node)


def _reference_forward(source: str | None) -> str | None:
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return _body_dump(item)
    return None


def _body_dump(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return "\n".join(ast.dump(s, annotate_fields=False) for s in body)


def _check_fallbacks(mod: _ModuleInfo, report: StaticReport) -> None:
    """try/except inside a function (other than a kernel) whose handler does not re-raise is a fallback."""
    for fn in ast.walk(mod.tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name in mod.kernels:
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                for h in node.handlers:  # type: ignore[attr-defined]
                    if not (h.body and isinstance(h.body[-1], ast.Raise)):
                        report.add("pytorch_fallback", "try/except whose handler does not re-raise: when the kernel "
                                   "fails it must fail, not fall back to another implementation", h)
            elif isinstance(node, ast.With):
                for item in node.items:
                    if (mod.resolve(getattr(item.context_expr, "func", item.context_expr)) or "").endswith("suppress"):
                        report.add("pytorch_fallback", "contextlib.suppress hides kernel failures", node)


def _check_everywhere(mod: _ModuleInfo, report: StaticReport) -> None:
    """Rules that hold for the whole module, reachable from forward or not."""
    docstrings = {id(n.value) for n in ast.walk(mod.tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    for node in ast.walk(mod.tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _check_import(node, report)
        elif isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
            _check_path(mod, node, report)
        elif isinstance(node, ast.Call):
            _check_call(mod, node, report)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                _check_store(mod, t, report)
        elif isinstance(node, ast.ClassDef):
            _check_class(mod, node, report)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            hit = next((s for s in _EVALUATOR_STRINGS if s in node.value), None)
            if hit:
                report.add("evaluator_access", f"mentions {hit!r}: the candidate must not read the evaluator's "
                           "files, processes or package", node)
    report.tf32_lines.extend(_tf32_dot_lines(mod))


def _tf32_dot_lines(mod: _ModuleInfo) -> list[int]:
    """Lines of the ``tl.dot`` calls that ask for one-pass tf32 inputs: ``input_precision="tf32"`` or
    ``allow_tf32=True`` written at the call, or passed in through a kernel parameter that a launch sets so
    (``PRECISION="tf32"``). ``"tf32x3"`` (three tf32 passes) and ``"ieee"`` keep float32 accuracy."""
    lines: list[int] = []
    via: dict[tuple[str, str], tuple[str, int, list[int]]] = {}  # (kernel, param) -> (dot keyword, position, lines)
    for name in mod.kernels:
        fn = mod.functions.get(name)
        params = [a.arg for a in fn.args.args] if fn else []
        for node in ast.walk(fn) if fn else ():
            if not (isinstance(node, ast.Call) and (mod.resolve(node.func) or "").endswith(".dot")):
                continue
            for kw in node.keywords:
                if isinstance(kw.value, ast.Constant) and _one_pass_tf32(kw.arg, kw.value.value):
                    lines.append(node.lineno)
                elif isinstance(kw.value, ast.Name) and kw.value.id in params:
                    entry = via.setdefault((name, kw.value.id), (kw.arg or "", params.index(kw.value.id), []))
                    entry[2].append(node.lineno)
    for node in ast.walk(mod.tree):  # launches: kernel[grid](..., PRECISION="tf32")
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in mod.kernels):
            continue
        for (kernel, param), (arg, pos, dots) in via.items():
            if kernel != node.func.value.id:
                continue
            given = [kw.value for kw in node.keywords if kw.arg == param]
            given += [node.args[pos]] if pos < len(node.args) else []
            if any(isinstance(v, ast.Constant) and _one_pass_tf32(arg, v.value) for v in given):
                lines.extend(dots)
    return sorted(set(lines))


def _one_pass_tf32(keyword: str | None, value: object) -> bool:
    return (keyword == "allow_tf32" and value is True) or (keyword == "input_precision" and value == "tf32")


def _forbidden(path: str) -> tuple[str, str] | None:
    for prefix, verdict in _FORBIDDEN_MODULES.items():
        if path == prefix or path.startswith(prefix + "."):
            return verdict
    for prefix, verdict in _OS_RULES.items():
        if path == prefix or path.startswith(prefix + "."):
            return verdict
    return None


def _check_import(node: ast.Import | ast.ImportFrom, report: StaticReport) -> None:
    if isinstance(node, ast.ImportFrom):
        names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        if node.level:
            report.add("evaluator_access", "relative import: the candidate is a single file", node)
    else:
        names = [a.name for a in node.names]
    for name in names:
        verdict = _forbidden(name)
        if verdict:
            report.add(verdict[0], f"imports `{name}`, which {verdict[1]}", node)


def _check_path(mod: _ModuleInfo, node: ast.Attribute | ast.Name, report: StaticReport) -> None:
    if isinstance(node, ast.Attribute) and (node.attr in _INTROSPECTION_ATTRS or (
            node.attr == "__dict__" and mod.is_module_path(node.value))):
        report.add("introspection", f"reads `.{node.attr}`, which reaches into the interpreter where the evaluator "
                   "lives", node)
    if not mod.is_module_path(node):
        return
    path = mod.resolve(node) or ""
    verdict = _forbidden(path)
    if verdict:
        report.add(verdict[0], f"uses `{path}`, which {verdict[1]}", node)
    elif path.startswith(("torch.cuda.", "torch.")) and path.rsplit(".", 1)[-1] in _STREAM_API:
        report.add("cuda_stream", f"uses `{path}`: work on another CUDA stream escapes the timer; launch on the "
                   "current stream", node)


def _check_call(mod: _ModuleInfo, node: ast.Call, report: StaticReport) -> None:
    func = node.func
    if isinstance(func, ast.Name) and func.id in _BUILTIN_RULES and func.id not in mod.functions \
            and func.id not in mod.aliases:
        rule, why = _BUILTIN_RULES[func.id]
        report.add(rule, f"calls `{func.id}()`, which {why}", node)
    if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args \
            and mod.is_module_path(node.args[0]):
        report.add("monkeypatch", f"`{func.id}` on `{mod.resolve(node.args[0])}`: the candidate must not change "
                   "torch, triton, time or the evaluator", node)
    path = mod.resolve(func) if mod.is_module_path(func) else None
    if path == "torch.set_float32_matmul_precision":
        arg = node.args[0] if node.args else None
        if not (isinstance(arg, ast.Constant) and arg.value == "highest"):
            report.add("precision_lowered", "torch.set_float32_matmul_precision lowers fp32 matmul precision "
                       "(tf32) for everything, the reference included", node)


def _check_store(mod: _ModuleInfo, target: ast.expr, report: StaticReport) -> None:
    if isinstance(target, (ast.Tuple, ast.List)):
        for e in target.elts:
            _check_store(mod, e, report)
        return
    base = target.value if isinstance(target, (ast.Attribute, ast.Subscript)) else None
    if base is None:
        return
    if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "vars" and base.args \
            and mod.is_module_path(base.args[0]):
        report.add("monkeypatch", f"writes into vars({mod.resolve(base.args[0])}): the candidate must not change torch, "
                   "triton, time, other modules or the evaluator", target)
    elif isinstance(target, ast.Attribute) and target.attr in _INTROSPECTION_ATTRS | {"__class__", "__dict__"}:
        report.add("monkeypatch", f"assigns `.{target.attr}`, rewriting code or objects at run time", target)
    elif mod.is_module_path(target if isinstance(target, ast.Attribute) else base):
        path = mod.resolve(target if isinstance(target, ast.Attribute) else base) or ""
        if "allow_tf32" in path or "reduced_precision_reduction" in path:
            report.add("precision_lowered", f"sets `{path}`: lowers precision for everything, the reference "
                       "included", target)
        else:
            report.add("monkeypatch", f"assigns to `{path}`: the candidate must not change torch, triton, time, "
                       "other modules or the evaluator", target)


def _check_class(mod: _ModuleInfo, node: ast.ClassDef, report: StaticReport) -> None:
    for base in node.bases:
        if (mod.resolve(base) or "") in ("torch.Tensor", "torch._C.TensorBase"):
            report.add("lazy_output", f"class {node.name} subclasses torch.Tensor: outputs must be plain tensors "
                       "computed inside forward, not objects that compute later", node)
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in (
                "__torch_function__", "__torch_dispatch__"):
            report.add("lazy_output", f"{node.name}.{item.name} intercepts torch operations", item)


def _collect_torch_ops(mod: _ModuleInfo, reach: _Reach, report: StaticReport) -> None:
    seen: set[tuple[str, int]] = set()

    def add(op: str, node: ast.AST) -> None:
        key = (op, getattr(node, "lineno", 0))
        if key not in seen:
            seen.add(key)
            report.torch_ops.append(TorchOpUse(op=op, line=key[1] or None, origin="static"))

    for fn in reach.functions:
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                add("@ (matmul)", node)
            elif isinstance(node, ast.Call):
                op = _torch_op(mod, reach, node.func)
                if op:
                    add(op, node)


def _torch_op(mod: _ModuleInfo, reach: _Reach, func: ast.expr) -> str | None:
    if mod.is_module_path(func):
        path = mod.resolve(func) or ""
        if not path.startswith("torch."):
            return None
        last = path.rsplit(".", 1)[-1]
        if last in GLUE_TORCH or last[:1].isupper() or path.startswith(_TORCH_INFRA):
            return None
        return path.replace("torch.nn.functional.", "F.")
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and func.value.id == "self" and func.attr in reach.layer_attrs:
        return f"{reach.layer_attrs[func.attr]} (self.{func.attr})"
    name = func.attr.rstrip("_")
    return f"Tensor.{name}" if name in TENSOR_COMPUTE_METHODS else None


_TORCH_INFRA = ("torch.cuda.", "torch.backends.", "torch.testing.", "torch.utils.", "torch.nn.init.",
                "torch.distributed.", "torch.autograd.", "torch.library.", "torch.version.")

