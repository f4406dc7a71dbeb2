"""Triton compile facts per kernel (registers, spills, shared memory, warps, stages), with or without a GPU.

Without a GPU the facts come from compiling ahead of time for a target such as ``sm_90``: the
candidate's forward runs once with every ``@triton.jit`` launch intercepted (the kernel does not
run), each launch is bound exactly as Triton's JIT binds it (argument types, specialisations and
``constexpr`` values, autotune and heuristics config included), and the bound kernel is compiled with
``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``. The forward runs on PyTorch's
``meta`` device at the problem's full size, so no data is touched; a candidate that needs real data
in its launcher falls back to CPU tensors at scaled-down shapes (the facts then say so).

Registers and local memory come from the cubin (``cuobjdump --dump-resource-usage``, bundled with
Triton). ``spills`` follows Triton's own ``n_spills``: local memory bytes per thread / 4.

On a GPU the same recorder passes launches through and the facts come from the compiled kernels
themselves. Works with Triton 3.6 and 3.9 (both bind through ``create_function_from_signature`` and
``JITFunction._pack_args``).

Worker: ``python -m tritonsmith.profiler._aot SPEC.json`` (spec: problem_path, problem_name,
candidate_path, arch, result_path).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_MAX_COMPILES = 12  # distinct kernel specialisations compiled per forward (each costs seconds on a CPU)
_RESOURCE_RE = re.compile(r"Function\s+(\S+?):?\s*\n\s*REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


@dataclass(frozen=True, kw_only=True)
class KernelFacts:
    """What Triton made of one kernel specialisation."""

    kernel: str
    target: str
    source: str  # "aot" (compiled here for the target) or "jit" (the kernel the GPU ran)
    launches: int = 1
    registers: int | None = None
    spills: int | None = None
    local_bytes: int | None = None
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    grid: tuple[int, ...] | None = None
    constexprs: dict[str, str] = field(default_factory=dict)
    signature: dict[str, str] = field(default_factory=dict)
    autotune_configs: int | None = None
    error: str | None = None

    @property
    def programs(self) -> int | None:
        if not self.grid:
            return None
        n = 1
        for g in self.grid:
            n *= g
        return n

    def describe(self) -> str:
        if self.error:
            return f"{self.kernel}: compile failed: {self.error}"
        parts = [f"{self.registers} regs" if self.registers is not None else "regs ?",
                 f"{self.spills} spills" if self.spills is not None else "spills ?",
                 f"{(self.shared_bytes or 0) // 1024} KiB smem", f"{self.num_warps} warps", f"{self.num_stages} stages"]
        if self.programs:
            parts.append(f"grid {self.programs} programs")
        cx = ", ".join(f"{k}={v}" for k, v in self.constexprs.items() if k.isupper() or k.startswith("BLOCK"))
        return f"{self.kernel} x{self.launches}: " + ", ".join(parts) + (f" ({cx})" if cx else "")


@dataclass
class _Launch:
    fn: Any
    grid: tuple[int, ...] | None
    bound: tuple[Any, ...] | None = None  # (signature, constexprs, attrs, options) in AOT mode
    kernel: Any = None  # the CompiledKernel in pass-through mode
    autotune_configs: int | None = None


class LaunchRecorder:
    """Intercept ``JITFunction.run`` for the launches of one forward.

    ``execute=False`` binds each launch for ``target`` and skips it (no GPU needed; autotuners pick
    their first config). ``execute=True`` runs the kernel as usual and keeps the compiled kernel.
    """

    def __init__(self, *, arch: int = 90, execute: bool = False) -> None:
        self.arch = arch
        self.execute = execute
        self.launches: list[_Launch] = []
        self._binders: dict[int, Any] = {}
        self._in_autotune = 0
        self._tuned: dict[int, int] = {}

    @contextmanager
    def active(self) -> Iterator[LaunchRecorder]:
        from triton.runtime import autotuner, jit

        original_run, original_bench = jit.JITFunction.run, getattr(autotuner.Autotuner, "_bench", None)
        recorder = self

        def run(fn: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if recorder._in_autotune:
                return original_run(fn, *args, grid=grid, warmup=warmup, **kwargs) if recorder.execute else None
            return recorder._record(original_run, fn, args, kwargs, grid, warmup)

        def bench(tuner: Any, *args: Any, config: Any, **meta: Any) -> Any:
            recorder._tuned[id(_base_fn(tuner))] = len(getattr(tuner, "configs", ()))
            recorder._in_autotune += 1
            try:
                if recorder.execute:
                    return original_bench(tuner, *args, config=config, **meta)
                # No GPU to time configs on: the first config benchmarked wins.
                return [float(recorder._in_autotune_count(tuner))] * 3
            finally:
                recorder._in_autotune -= 1

        jit.JITFunction.run = run  # type: ignore[method-assign]
        if original_bench is not None:
            autotuner.Autotuner._bench = bench  # type: ignore[method-assign]
        try:
            yield self
        finally:
            jit.JITFunction.run = original_run  # type: ignore[method-assign]
            if original_bench is not None:
                autotuner.Autotuner._bench = original_bench  # type: ignore[method-assign]

    def _in_autotune_count(self, tuner: Any) -> int:
        key = -id(tuner)
        self._tuned[key] = self._tuned.get(key, -1) + 1
        return self._tuned[key]

    def _record(self, original_run: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any,
                warmup: bool) -> Any:
        tuned = self._tuned.get(id(fn))
        if self.execute:
            kernel = original_run(fn, *args, grid=grid, warmup=warmup, **kwargs)
            if not warmup:
                bound = dict(zip(fn.arg_names, args)) | kwargs
                self.launches.append(_Launch(fn=fn, grid=_grid(grid, bound), kernel=kernel, autotune_configs=tuned))
            return kernel
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend
        from triton.runtime.jit import create_function_from_signature

        backend = make_backend(GPUTarget("cuda", self.arch, 32))
        if id(fn) not in self._binders:
            self._binders[id(fn)] = create_function_from_signature(fn.signature, fn.params, backend)
        kwargs = dict(kwargs)
        kwargs["debug"] = bool(kwargs.get("debug", getattr(fn, "debug", None)))
        bound_args, specialization, options = self._binders[id(fn)](*args, **kwargs)
        packed = fn._pack_args(backend, kwargs, bound_args, specialization, options)
        self.launches.append(_Launch(fn=fn, grid=_grid(grid, dict(bound_args)), bound=packed, autotune_configs=tuned))
        return None


def _base_fn(tuner: Any) -> Any:
    fn = tuner
    while hasattr(fn, "fn") and not hasattr(fn, "params"):
        fn = fn.fn
    return fn


def _grid(grid: Any, bound: dict[str, Any]) -> tuple[int, ...] | None:
    try:
        g = grid(bound) if callable(grid) else grid
        return tuple(int(x) for x in g)
    except Exception as exc:  # a grid lambda reading something we did not bind: the grid is then unknown
        log.debug("grid not evaluated: %s", exc)
        return None


def facts_from_launches(launches: list[_Launch], *, arch: int = 90) -> list[KernelFacts]:
    """One :class:`KernelFacts` per distinct specialisation, in first-launch order, with launch counts."""
    groups: dict[str, list[_Launch]] = {}
    for launch in launches:
        key = f"{id(launch.fn)}:{_spec_key(launch)}"
        groups.setdefault(key, []).append(launch)
    facts = []
    for i, group in enumerate(groups.values()):
        first = group[0]
        if i >= _MAX_COMPILES:
            facts.append(KernelFacts(kernel=_name(first.fn), target=f"sm_{arch}", source="aot", launches=len(group),
                                     error=f"not compiled: only the first {_MAX_COMPILES} specialisations are"))
            continue
        fact = _jit_facts(first, arch) if first.kernel is not None else compile_launch(first, arch=arch)
        facts.append(_with(fact, launches=len(group), grid=first.grid, autotune_configs=first.autotune_configs))
    return facts


def compile_launch(launch: _Launch, *, arch: int = 90) -> KernelFacts:
    """Compile one recorded launch ahead of time for ``sm_<arch>`` and read its resources."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constexprs, attrs = launch.bound[1], launch.bound[2], launch.bound[3]
    options = launch.bound[0]
    base = KernelFacts(kernel=_name(launch.fn), target=f"sm_{arch}", source="aot", signature=dict(signature),
                       constexprs=_named_constexprs(launch.fn, constexprs))
    try:
        compiled = triton.compile(ASTSource(launch.fn, signature, constexprs, attrs),
                                  target=GPUTarget("cuda", arch, 32), options=options.__dict__)
    except Exception as exc:  # a kernel that does not compile is a finding about the candidate, reported as such
        return _with(base, error=_short(exc))
    return _with(base, **_compiled_facts(compiled))


def compile_kernel(fn: Any, signature: dict[str, str], constexprs: dict[str, Any] | None = None, *,
                   arch: int = 90, num_warps: int = 4, num_stages: int = 3) -> KernelFacts:
    """Compile a ``@triton.jit`` function for ``sm_<arch>`` from an explicit signature, e.g.
    ``{"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}`` with ``constexprs={"BLOCK": 1024}``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    base = KernelFacts(kernel=_name(fn), target=f"sm_{arch}", source="aot", signature=dict(signature),
                       constexprs={k: str(v) for k, v in (constexprs or {}).items()})
    try:
        compiled = triton.compile(ASTSource(fn, signature, constexprs or {}),
                                  target=GPUTarget("cuda", arch, 32),
                                  options={"num_warps": num_warps, "num_stages": num_stages})
    except Exception as exc:  # compile errors are the kernel's, reported in the facts
        return _with(base, error=_short(exc))
    return _with(base, **_compiled_facts(compiled))


def _jit_facts(launch: _Launch, arch: int) -> KernelFacts:
    kernel = launch.kernel
    facts = KernelFacts(kernel=_name(launch.fn), target=f"sm_{arch}", source="jit",
                        signature={k: str(v) for k, v in getattr(kernel.src, "signature", {}).items()}
                        if hasattr(kernel, "src") else {},
                        constexprs=_named_constexprs(launch.fn, getattr(getattr(kernel, "src", None), "constants", {})))
    values = _compiled_facts(kernel)
    if getattr(kernel, "n_regs", None) is not None:
        values["registers"] = int(kernel.n_regs)
        values["spills"] = int(kernel.n_spills)
    return _with(facts, **values)


def _compiled_facts(compiled: Any) -> dict[str, Any]:
    meta = compiled.metadata
    values: dict[str, Any] = {"shared_bytes": int(getattr(meta, "shared", 0) or 0),
                              "num_warps": int(meta.num_warps), "num_stages": int(meta.num_stages)}
    cubin = compiled.asm.get("cubin") if hasattr(compiled, "asm") else None
    if cubin:
        regs, local = cubin_resources(cubin, compiled.name)
        if regs is not None:
            values.update(registers=regs, local_bytes=local, spills=(local or 0) // 4)
    return values


def cubin_resources(cubin: bytes, kernel_name: str) -> tuple[int | None, int | None]:
    """(registers per thread, local memory bytes per thread) of ``kernel_name`` in a cubin."""
    tool = _cuobjdump()
    if tool is None:
        return None, None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True,
                                 timeout=30, check=False).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("cuobjdump failed: %s", exc)
            return None, None
    return parse_resource_usage(out, kernel_name)


def parse_resource_usage(text: str, kernel_name: str) -> tuple[int | None, int | None]:
    """(registers, STACK + LOCAL bytes per thread) of ``kernel_name`` in ``cuobjdump --dump-resource-usage``
    output; spilled registers live in the stack frame."""
    rows = {m.group(1): m for m in _RESOURCE_RE.finditer(text)}
    m = rows.get(kernel_name) or next(iter(rows.values()), None)
    if m is None:
        return None, None
    return int(m.group(2)), int(m.group(3)) + int(m.group(5))


def _cuobjdump() -> str | None:
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.is_file():
            return str(bundled)
    except ImportError:
        pass
    return shutil.which("cuobjdump")


def _spec_key(launch: _Launch) -> str:
    if launch.bound is not None:
        options = launch.bound[0]
        return repr((launch.bound[1], launch.bound[2], launch.bound[3], options.num_warps, options.num_stages))
    return str(getattr(launch.kernel, "hash", id(launch.kernel)))


def _named_constexprs(fn: Any, constexprs: dict[Any, Any]) -> dict[str, str]:
    names = getattr(fn, "arg_names", [])
    out = {}
    for key, value in constexprs.items():
        idx = key[0] if isinstance(key, tuple) and key else key
        name = names[idx] if isinstance(idx, int) and idx < len(names) else str(key)
        out[name] = str(getattr(value, "value", value))
    return out


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "kernel")


def _with(facts: KernelFacts, **changes: Any) -> KernelFacts:
    from dataclasses import replace

    return replace(facts, **changes)


def _short(exc: BaseException, limit: int = 600) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + " ..."


# -- worker ---------------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """Record one forward's launches and compile them for the target; write JSON facts."""
    spec = json.loads(Path(argv[1]).read_text())
    result: dict[str, Any] = {"facts": [], "notes": []}
    started = time.perf_counter()
    try:
        launches, note = _record_forward(spec)
    except _CandidateError as exc:
        result.update(error=str(exc))
        _write(spec, result)
        return 0
    if note:
        result["notes"].append(note)
    result["launches"] = len(launches)
    result["record_s"] = round(time.perf_counter() - started, 2)
    facts = facts_from_launches(launches, arch=int(spec.get("arch", 90)))
    result["facts"] = [asdict(f) for f in facts]
    result["compile_s"] = round(time.perf_counter() - started - result["record_s"], 2)
    _write(spec, result)
    return 0


class _CandidateError(Exception):
    """The candidate could not be loaded or run far enough to record its launches."""


def _record_forward(spec: dict[str, Any]) -> tuple[list[_Launch], str | None]:
    """Run ModelNew's forward once with launches intercepted: on ``meta`` at full size, else on CPU scaled."""
    from tritonsmith.core.modload import import_file
    from tritonsmith.core.problem_meta import exec_reference

    source = Path(spec["problem_path"]).read_text()
    try:
        module = import_file(Path(spec["candidate_path"]), "_tritonsmith_candidate")
    except BaseException as exc:  # untrusted candidate code
        raise _CandidateError(f"the candidate failed to import: {_short(exc)}") from exc
    attempts: list[tuple[str, str, str | None]] = [(source, "meta", None)]
    first_error = None
    for problem_source, device, note in attempts:
        try:
            ref = exec_reference(problem_source, spec["problem_name"])
            return _run_recorded(module, ref, spec, device), note
        except BaseException as exc:  # noqa: BLE001 - the candidate's launcher may fail on meta; try CPU
            if isinstance(exc, KeyboardInterrupt):
                raise
            first_error = first_error or exc
            if device == "meta":
                scaled = _scaled_source(spec)
                if scaled is not None:
                    attempts.append((scaled[0], "cpu", f"launches recorded on CPU tensors at scaled shapes "
                                     f"({scaled[1]}) because the forward failed on the meta device "
                                     f"({_short(exc, 200)}): constexprs derived from shapes may differ at full size"))
    raise _CandidateError(f"could not record the candidate's launches: ModelNew.forward raised {_short(first_error)}")


def _run_recorded(module: Any, ref: Any, spec: dict[str, Any], device: str) -> list[_Launch]:
    import torch

    from tritonsmith.core.problem_meta import instantiate

    cls = getattr(module, "ModelNew", None)
    if not isinstance(cls, type):
        raise _CandidateError("the candidate defines no class ModelNew")
    _, init, inputs = instantiate(ref, spec["problem_name"], device)
    torch.manual_seed(0)
    with torch.device(device):
        model = cls(*init)
    model = model.to(device) if hasattr(model, "to") else model
    recorder = LaunchRecorder(arch=int(spec.get("arch", 90)), execute=False)
    with recorder.active(), torch.no_grad():
        model(*inputs)
    return recorder.launches


def _scaled_source(spec: dict[str, Any]) -> tuple[str, str] | None:
    from tritonsmith.core.problem import Problem, ProblemError

    try:
        scaled = Problem.from_source(Path(spec["problem_path"]).read_text(), name=spec["problem_name"]).scaled()
    except ProblemError:
        return None
    return scaled.source, scaled.scaling_note or "unchanged"


def _write(spec: dict[str, Any], result: dict[str, Any]) -> None:
    path = Path(spec["result_path"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(path)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(sys.argv))
