"""Compile every kernel the built-in generator writes for a real GPU target, ahead of time, on the CPU.

The Triton interpreter (the CPU tests) accepts code the GPU compiler may reject, and says nothing about
registers, spills or shared memory. This compiles each launch of each emitted candidate for sm_90 (the
H200) with the installed Triton and lists the compile facts; no timing (that needs a GPU).

    .venv/bin/python benchmarks/builtin_aot.py ../shared/kernelbench-dev [--levels 1 2] [--arch 90]

Writes ``builtin_aot.json`` and ``builtin_aot.md`` into $OUT (default: the current directory). Pointer
arguments are compiled as fp32 (the generator's kernels index fp32 data; an integer output such as argmax
is then compiled with fp32 stores, which changes no control flow).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any


def launches(source: str) -> list[tuple[str, int, dict[str, Any]]]:
    """(kernel name, positional argument count, keyword constants incl. num_warps/num_stages) per launch."""
    out = []
    for call in ast.walk(ast.parse(source)):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name):
            kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
            out.append((call.func.value.id, len(call.args), kw))
    return out


def compile_candidate(path: Path, arch: int, shared_stores: bool = True) -> list[dict[str, Any]]:
    """Registers, spills and shared memory of each kernel the candidate at ``path`` launches, compiled for
    ``sm_<arch>``; ``shared_stores`` also counts its ``st.shared`` instructions (a second compile)."""
    from tritonsmith.profiler._aot import compile_kernel

    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = []
    for name, _, kw in launches(path.read_text()):
        fn = getattr(module, name)
        options = {k: kw.pop(k) for k in ("num_warps", "num_stages") if k in kw}
        params = list(inspect.signature(fn.fn).parameters)
        signature = {p: "constexpr" if p in kw else ("*fp32" if p.endswith("_ptr") else "i32") for p in params}
        facts = compile_kernel(fn, signature, kw, arch=arch, **options)
        rows.append({"kernel": name, "registers": facts.registers, "spills": facts.spills,
                     "shared_bytes": facts.shared_bytes, "num_warps": options.get("num_warps", 4),
                     "num_stages": options.get("num_stages", 3), "error": facts.error,
                     "shared_stores": None if facts.error or not shared_stores else
                     _shared_stores(fn, signature, kw, arch, options)})
    return rows


def _shared_stores(fn: Any, signature: dict[str, str], constexprs: dict[str, Any], arch: int,
                   options: dict[str, Any]) -> int:
    """``st.shared`` instructions in the kernel's PTX, pointers 16-byte aligned as the JIT specialises them. A
    kernel with no tile transposes or reductions that still has hundreds is moving values through shared
    memory in its loop (Triton 3.6's broadcast of a differently laid-out [BLOCK_K, 1] value: 1024 in 19's
    BatchNorm apply kernel, 6x its statistics kernel's time on the H200)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(signature)
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if signature[n].startswith("*")}
    consts = {(names.index(k),): v for k, v in constexprs.items() if k in names}
    compiled = triton.compile(ASTSource(fn, signature, consts, attrs), target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": options.get("num_warps", 4), "num_stages": options.get("num_stages", 3)})
    return compiled.asm["ptx"].count("st.shared")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernelbench", type=Path)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--arch", type=int, default=90)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import triton

    from tritonsmith.agents.base import GenerationRequest
    from tritonsmith.agents.builtin import BuiltinGenerator
    from tritonsmith.core.problem import Problem

    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tritonsmith-aot-"))
    sys.path.insert(0, str(work))
    gen = BuiltinGenerator()
    problems: list[dict[str, Any]] = []
    for level in args.levels:
        for path in sorted((args.kernelbench / f"level{level}").glob("*.py")):
            cand = gen.generate(GenerationRequest(problem=Problem.from_file(path), iteration=1))
            if cand.source is None:
                continue
            file = work / f"l{level}_{path.stem}.py"
            file.write_text(cand.source)
            problems.append({"problem": f"level{level}/{path.stem}", "kernels": compile_candidate(file, args.arch)})
    kernels = [k for p in problems for k in p["kernels"]]
    summary = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "triton": triton.__version__,
               "arch": f"sm_{args.arch}", "command": " ".join(sys.argv), "problems": len(problems),
               "kernels": len(kernels), "failed": sum(1 for k in kernels if k["error"]),
               "spilling": sum(1 for k in kernels if k["spills"])}
    (out / "builtin_aot.json").write_text(json.dumps({**summary, "rows": problems}, indent=1))
    lines = [f"# Built-in generator kernels compiled ahead of time for {summary['arch']}", "",
             "```", json.dumps(summary, indent=1), "```", "",
             "| problem | kernel | registers | spills | shared KiB | shared stores | warps | stages | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in problems:
        for k in p["kernels"]:
            smem = f"{k['shared_bytes'] / 1024:.0f}" if k["shared_bytes"] is not None else ""
            lines.append(f"| {p['problem']} | {k['kernel']} | {k['registers'] or ''} | {k['spills'] if k['spills'] is not None else ''} "
                         f"| {smem} | {k.get('shared_stores', '')} | {k['num_warps']} | {k['num_stages']} "
                         f"| {(k['error'] or '')[:120]} |")
    (out / "builtin_aot.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
