"""Run-time guards inside the evaluation worker: what a candidate does, not what its source says.

* :class:`LaunchCounter` counts Triton launches (``JITFunction.run``; the interpreter's on the CPU) and
  marks the time spent inside them, so :class:`OpRecorder` can tell the candidate's own PyTorch
  operations from those Triton makes while launching.
* :class:`Integrity` remembers torch, triton, time, builtins and the evaluator's own functions before
  the candidate is imported and names anything replaced later (timer monkeypatching and friends).
* helpers for inputs the candidate mutated, outputs that alias inputs, memory poisoning, new threads
  and processes, and global precision flags.

Every finding raises :class:`CandidateFailure` with status ``rejected`` and a ``rule``.
"""

from __future__ import annotations

import builtins
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from tritonsmith.evaluator._errors import CandidateFailure
from tritonsmith.evaluator._rules import rule as known_rule

# torch functions and Tensor methods (normalised: no leading/trailing underscores) that allocate,
# view, copy, cast or describe: what a launcher needs, never "the work".
GLUE_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "zero",
    "arange", "tensor", "as_tensor", "from_numpy", "scalar_tensor", "view", "view_as", "reshape", "reshape_as",
    "as_strided", "permute", "transpose", "t", "mT", "T", "expand", "expand_as", "squeeze", "unsqueeze", "select",
    "narrow", "split", "split_with_sizes", "chunk", "unbind", "flatten", "unflatten", "movedim", "moveaxis",
    "swapaxes", "detach", "clone", "copy", "to", "type", "float", "half", "bfloat16", "double", "int", "long",
    "bool", "short", "byte", "char", "cuda", "cpu", "contiguous", "resize", "item", "tolist", "numpy", "cat",
    "concat", "concatenate", "stack", "view_as_real", "view_as_complex", "pad", "unfold", "diagonal", "get",
    "getitem", "setitem", "len", "iter", "format", "repr", "bool", "index", "float", "int", "hash", "contains",
    "reduce_ex", "deepcopy", "data_ptr", "stride", "size", "dim", "ndimension", "numel", "nelement",
    "element_size", "is_contiguous", "is_floating_point", "is_complex", "get_device", "storage_offset",
    "untyped_storage", "storage", "requires_grad", "pin_memory", "record_stream", "is_set_to", "is_pinned",
    "share_memory", "data", "grad", "shape", "dtype", "device", "is_cuda", "layout", "names", "new_tensor",
    "is_nonzero", "requires_grad_", "set", "resolve_conj", "resolve_neg", "align_to", "rename",
    "set_grad_enabled", "is_grad_enabled", "no_grad", "inference_mode", "enable_grad", "is_inference_mode_enabled",
})
_ARITHMETIC = {"add", "sub", "mul", "truediv", "div", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
               "lshift", "rshift", "neg", "abs"}
_FAMILIES = {
    "matmul": ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "addmv", "mv", "dot", "einsum",
               "tensordot", "bilinear", "inner", "outer"),
    "softmax": ("softmax", "log_softmax", "softmin"),
    "layer_norm": ("layer_norm", "native_layer_norm", "rms_norm"),
    "batch_norm": ("batch_norm", "native_batch_norm", "instance_norm"),
    "group_norm": ("group_norm", "native_group_norm"),
    "attention": ("scaled_dot_product_attention", "multi_head_attention_forward"),
    "div": ("truediv", "div", "divide", "true_divide"),
}
_FAMILY_OF = {op: fam for fam, ops in _FAMILIES.items() for op in ops}


def normalise(op: str) -> str:
    """``__radd__`` -> ``add``, ``relu_`` -> ``relu``, ``__get__`` (a property) -> ``get``."""
    name = op.strip("_")
    if op.startswith("__") and name[:1] in ("r", "i") and name[1:] in _ARITHMETIC:
        name = name[1:]
    return name


def family(op: str) -> str:
    """Group functions that do the same job (``linear``, ``mm`` and ``@`` are all ``matmul``)."""
    name = normalise(op)
    if "conv" in name:
        return "conv"
    return _FAMILY_OF.get(name, name)


def is_glue(op: str) -> bool:
    return normalise(op) in GLUE_OPS


def reject(rule: str, stage: str, message: str) -> CandidateFailure:
    """The failure for a broken rule; ``rule`` must be one of ``_rules.RULES`` (an unknown one is our bug)."""
    return CandidateFailure("rejected", stage, message, rule=known_rule(rule).name)


class LaunchCounter:
    """Count Triton kernel launches; ``depth > 0`` while one is in progress.

    Also records the launched kernels' names (``names``), launches made while the current CUDA stream
    was not the caller's (``foreign_streams``: however that stream was obtained, Triton launches on the
    current one), and, while ``suppress`` is set, skips the launches altogether (the decorative-kernel
    check: does the output still come out right without them?).
    """

    def __init__(self) -> None:
        self.launches = 0
        self.depth = 0
        self.names: set[str] = set()
        self.foreign_streams = 0
        self.suppress = False
        self.home_stream: int | None = None
        self._originals: list[tuple[type, Any]] = []

    def install(self) -> None:
        for cls in _launch_classes():
            original = cls.__dict__["run"]
            cls.run = self._wrap(original)  # type: ignore[attr-defined]
            self._originals.append((cls, original))

    def uninstall(self) -> None:
        for cls, original in self._originals:
            cls.run = original  # type: ignore[attr-defined]
        self._originals.clear()

    def _wrap(self, original: Any) -> Any:
        counter = self

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup", False):
                counter.launches += 1
                counter.names.add(getattr(getattr(self, "fn", None), "__name__", "") or getattr(self, "__name__", ""))
                if counter.home_stream is not None and _on_foreign_stream(counter.home_stream):
                    counter.foreign_streams += 1
                if counter.suppress:
                    return None
            counter.depth += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                counter.depth -= 1

        run.__wrapped__ = original  # type: ignore[attr-defined]
        return run


def _on_foreign_stream(home: int) -> bool:
    """Launching on a stream other than ``home``; CUDA-graph capture (Triton's own autotuner can benchmark
    that way, on a capture stream of its own) does not run anything and does not count."""
    import torch

    return torch.cuda.current_stream().cuda_stream != home and not torch.cuda.is_current_stream_capturing()


def _launch_classes() -> list[type]:
    classes: list[type] = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
    except ImportError:  # no triton at all: the candidate's import fails first
        return classes
    # The interpreter's launcher matters only where it runs kernels (TRITON_INTERPRET, or code that loaded it);
    # importing it on a GPU costs ~0.1 s of every evaluation for nothing.
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or "triton.runtime.interpreter" in sys.modules:
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        except ImportError:
            pass
    return classes


def op_recorder(counter: LaunchCounter, ops: Counter[str]) -> Any:
    """A TorchFunctionMode recording the torch functions and Tensor methods called outside Triton launches.

    Function level, not aten: only the outermost call is seen (``nn.Linear`` is one ``linear``), and
    unlike a TorchDispatchMode it does not import ``torch._dynamo`` (1.5 s on a small CPU).
    """
    from torch.overrides import TorchFunctionMode

    class OpRecorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            if counter.depth == 0:
                ops[getattr(func, "__name__", str(func))] += 1
            return func(*args, **(kwargs or {}))

    return OpRecorder()


def compute_ops(ops: Counter[str]) -> Counter[str]:
    return Counter({normalise(k): v for k, v in ops.items() if not is_glue(k)})


def policy_findings(policy: str, ref_ops: Counter[str], cand_ops: Counter[str]) -> tuple[str, str] | None:
    """(rule, message) when PyTorch does more of the work than ``policy`` allows, else None."""
    cand = compute_ops(cand_ops)
    if not cand:
        return None
    listed = ", ".join(f"{k} x{v}" for k, v in cand.most_common(8))
    if policy == "strict":
        return "torch_compute", (f"ModelNew.forward computes with PyTorch ({listed}); the strict policy wants all "
                                 "compute in Triton kernels (PyTorch may only allocate, view, copy and cast)")
    ref_families = {family(k) for k in compute_ops(ref_ops)}
    cand_families = {family(k) for k in cand}
    if ref_families and ref_families <= cand_families:
        return "torch_does_the_work", (
            f"every compute operation of the reference ({', '.join(sorted(ref_families))}) also runs in PyTorch "
            f"inside ModelNew.forward ({listed}); PyTorch may keep some operations under the hybrid policy, but "
            "Triton kernels must do the rest")
    return None


class Integrity:
    """Identity of every function, class and module in the watched namespaces, taken before the candidate."""

    def __init__(self) -> None:
        self._targets: list[tuple[str, Any, bool]] = []
        self._saved: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._keys: dict[str, frozenset[str]] = {}

    def watch(self, label: str, namespace: Any, *, closed: bool = False) -> None:
        """``closed``: names added later count as changes too (classes, where a new name shadows a base's)."""
        self._targets.append((label, namespace, closed))

    def snapshot(self) -> None:
        self._saved.clear()
        for label, ns, _closed in self._targets:
            items = _namespace(ns)
            self._keys[label] = frozenset(items)
            for key, value in items.items():
                if _watched(value):
                    self._saved[(label, key)] = (value, getattr(value, "__code__", None))

    def changes(self) -> list[str]:
        found: list[str] = []
        current = {label: _namespace(ns) for label, ns, _ in self._targets}
        for (label, key), (value, code) in self._saved.items():
            now = current[label].get(key, _MISSING)
            if now is not value and not _torch_wrapper(now, value):
                found.append(f"{label}.{key} was {'deleted' if now is _MISSING else 'replaced'}")
            elif code is not None and getattr(_unwrapped(now, value), "__code__", None) is not code:
                found.append(f"{label}.{key}.__code__ was replaced")
        for label, _ns, closed in self._targets:
            if closed:
                found += [f"{label}.{k} was added" for k in sorted(set(current[label]) - self._keys[label])
                          if _watched(current[label][k])]
        return found


_MISSING = object()


def _torch_wrapper(now: Any, before: Any) -> bool:
    """torch wraps some of its own functions once, lazily (``torch._dynamo`` disables itself on them)."""
    return getattr(now, "__wrapped__", None) is before and str(getattr(now, "__module__", "")).startswith("torch")


def _unwrapped(now: Any, before: Any) -> Any:
    """The function whose code must be unchanged: ``before`` itself when torch wrapped it with its own code
    (``torch/_compile.py``: under deterministic mode torch re-wraps ``torch.manual_seed``)."""
    code = getattr(now, "__code__", None)
    if code is not None and _torch_wrapper(now, before) and code.co_filename.endswith(_TORCH_COMPILE_PY):
        return before
    return now


_TORCH_COMPILE_PY = os.path.join("torch", "_compile.py")


def _namespace(ns: Any) -> dict[str, Any]:
    try:
        return dict(vars(ns))
    except TypeError:
        return {}


def _watched(value: Any) -> bool:
    return callable(value) or isinstance(value, (ModuleType, type))


def default_integrity(counter_installed: bool = True) -> Integrity:
    """Watch what a timer or comparison hack would patch. Call after the evaluator's modules are imported."""
    import sys

    import torch

    guard = Integrity()
    for label, module in (("time", time), ("builtins", builtins), ("torch", torch), ("torch.cuda", torch.cuda),
                          ("torch.nn.functional", torch.nn.functional), ("torch.testing", torch.testing),
                          ("os", os), ("threading", threading)):
        guard.watch(label, module)
    guard.watch("torch.Tensor", torch.Tensor, closed=True)
    base = getattr(torch._C, "TensorBase", None) or getattr(torch._C, "_TensorBase", None)
    if base is not None:
        guard.watch("torch._C.TensorBase", base, closed=True)
    for name in ("Event", "Stream"):
        cls = getattr(torch.cuda, name, None)
        if isinstance(cls, type):
            guard.watch(f"torch.cuda.{name}", cls, closed=True)
            for parent in cls.__mro__[1:-1]:
                guard.watch(f"torch.cuda.{name}<{parent.__name__}>", parent, closed=True)
    for cls in _launch_classes():
        guard.watch(f"triton.{cls.__name__}", cls, closed=True)
    for name in ("triton", "triton.testing", "triton.runtime.autotuner", "statistics", "math", "json"):
        if name in sys.modules:
            guard.watch(name, sys.modules[name])
    for name in sorted(sys.modules):
        if name.startswith(("tritonsmith.evaluator._", "tritonsmith.evaluator.sandbox._", "tritonsmith.profiler._",
                             "tritonsmith.core.results", "tritonsmith.core._feedback", "tritonsmith.core.problem_meta",
                             "tritonsmith.core.modload")):
            guard.watch(name, sys.modules[name])
    guard.snapshot()
    return guard


def precision_state() -> dict[str, Any]:
    """Global switches that change the numerics of every matmul and convolution, the reference's included."""
    import torch

    state: dict[str, Any] = {"float32_matmul_precision": torch.get_float32_matmul_precision(),
                             "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                             "deterministic_algorithms": torch.are_deterministic_algorithms_enabled()}
    matmul = torch.backends.cuda.matmul
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        try:
            state[f"cuda.matmul.{name}"] = getattr(matmul, name)
        except (AttributeError, RuntimeError):
            continue
    return state


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}


def new_threads(baseline: set[int]) -> list[str]:
    return [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in baseline]


def child_pids() -> list[int]:
    """Live children of this process (Linux ``/proc``; empty elsewhere)."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return [p for p in pids if _alive(p)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def save_inputs(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def mutated_inputs(saved: list[Any], inputs: list[Any]) -> list[int]:
    import torch

    bad = []
    for i, (s, x) in enumerate(zip(saved, inputs, strict=True)):
        if isinstance(s, torch.Tensor):
            if s.shape == x.shape and s.dtype == x.dtype and torch.equal(s, x):
                continue  # the usual answer in one comparison; NaN inputs take the path below
            same = s.shape == x.shape and s.dtype == x.dtype and bool(
                (torch.eq(s, x) | (torch.isnan(s) & torch.isnan(x)) if s.is_floating_point() else torch.eq(s, x)).all())
            if not same:
                bad.append(i)
    return bad


def _span(t: Any) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def shares_memory(a: Any, others: Iterable[Any]) -> bool:
    """True when tensor ``a``'s storage overlaps any tensor in ``others``."""
    import torch

    lo, hi = _span(a)
    for b in others:
        if isinstance(b, torch.Tensor) and b.device == a.device:
            blo, bhi = _span(b)
            if lo < bhi and blo < hi and hi > lo:
                return True
    return False


def poison(outputs: list[Any], keep_away: list[Any]) -> int:
    """Fill the reference's outputs with NaN (ints: a sentinel) in place before their memory is freed.

    A candidate that allocates its output and never writes it then reads NaN, not the reference's answer
    left behind in the caching allocator. Tensors sharing memory with ``keep_away`` (inputs, parameters)
    are left alone. Returns how many tensors were poisoned.
    """
    import torch

    done = 0
    for o in outputs:
        if not isinstance(o, torch.Tensor) or o.numel() == 0 or shares_memory(o, keep_away):
            continue
        if o.is_floating_point() or o.is_complex():
            o.fill_(float("nan"))
        elif o.dtype != torch.bool:
            o.fill_(-7)
        else:
            continue
        done += 1
    return done


def is_plain_tensor(x: Any) -> bool:
    import torch

    return type(x) is torch.Tensor or type(x) is torch.nn.Parameter



class Guards:
    """The worker's run-time checks for one evaluation, armed before the candidate is imported."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.enabled: bool = bool(spec.get("checks", True))
        self.policy: str = spec.get("policy", "hybrid")
        self.device: str = spec["device"]
        self.counter = LaunchCounter()
        self.ref_ops: Counter[str] = Counter()
        self.cand_ops: Counter[str] = Counter()
        self.launches: int | None = None
        self.notes: list[str] = []
        # normwise distance between the candidate's and the reference's outputs that TF32 library calls on
        # both sides explained in the trials (``_trials._against_strict_fp32``); widens the timed checks
        self.tf32_spread = 0.0
        self.integrity: Integrity | None = None
        self._precision: dict[str, Any] = {}
        self._threads: set[int] = set()
        self._children: set[int] = set()
        self._stream: Any = None
        self.triton_share: float | None = None

    def arm(self) -> None:
        if not self.enabled:
            return
        import torch

        self.counter.install()
        self.integrity = default_integrity()
        self._precision = precision_state()
        self._threads = live_threads()
        self._children = set(child_pids())
        if self.device == "cuda":
            self._stream = torch.cuda.current_stream().cuda_stream
            self.counter.home_stream = self._stream

    def checkpoint(self, stage: str) -> None:
        """Reject if anything watched changed since :meth:`arm`."""
        if not self.enabled or self.integrity is None:
            return
        changed = self.integrity.changes()
        if changed:
            raise reject("monkeypatch", stage, "the candidate replaced functions the evaluator or the timer relies "
                         f"on: {'; '.join(changed[:5])}")
        now = precision_state()
        diff = [f"{k}: {self._precision[k]!r} -> {v!r}" for k, v in now.items() if self._precision.get(k) != v]
        if diff:
            raise reject("precision_lowered", stage, "the candidate changed global numerics switches, which also "
                         f"change the reference: {'; '.join(diff)}")
        threads = new_threads(self._threads)
        if threads:
            raise reject("background_thread", stage, f"the candidate left threads running ({', '.join(threads[:5])}); "
                         "work on another thread escapes the timer")
        children = [p for p in child_pids() if p not in self._children]
        if children:
            raise reject("child_process", stage, f"the candidate left child processes running (pids {children[:5]})")
        if self.counter.foreign_streams:
            raise reject("side_stream", stage, f"{self.counter.foreign_streams} Triton launch(es) ran while the current "
                         "CUDA stream was not the caller's: work on another stream escapes the timer; launch "
                         "everything on the current stream")
        if self._stream is not None:
            import torch

            if torch.cuda.current_stream().cuda_stream != self._stream:
                raise reject("cuda_stream", stage, "the candidate switched the current CUDA stream; work on another "
                             "stream escapes the timer")

    def admit_threads(self, idents: set[int]) -> None:
        """Threads the evaluator itself started (inductor's tqdm monitor while compiling the reference)."""
        self._threads |= idents

    def before_benchmark(self) -> None:
        """Check before timing. The launch counter stays in: its stream check costs host time only, which
        the timer's GPU sleep hides."""
        self.checkpoint("correctness")
        if self.enabled and self.integrity is not None:
            self.integrity.snapshot()

    def report(self) -> dict[str, Any]:
        ops = compute_ops(self.cand_ops)
        return {"policy": self.policy, "kernel_launches": self.launches, "notes": list(self.notes),
                "triton_share": self.triton_share,
                "torch_ops": [{"op": k, "count": v, "origin": "runtime"} for k, v in ops.most_common()]}
