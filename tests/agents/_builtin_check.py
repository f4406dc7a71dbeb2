"""Run emitted candidates against their references on the Triton interpreter (a subprocess helper).

usage: python _builtin_check.py CASES.json -> prints one JSON line {name: {"ok": bool, "detail": str}}
Each case: {"name", "problem": path, "candidate": path}. TRITON_INTERPRET=1 must be set by the caller.
Tests call :func:`run_on_interpreter`, which writes the files and runs this script.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from tritonsmith.core.problem_meta import exec_reference, flatten_outputs


def check(problem: Path, candidate: Path, trials: int = 2) -> tuple[bool, str]:
    ref = exec_reference(problem.read_text(), problem.stem)
    spec = importlib.util.spec_from_file_location(f"cand_{candidate.stem}", candidate)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    init = ref.get_init_inputs()
    torch.manual_seed(0)
    model = ref.Model(*init)
    torch.manual_seed(0)
    cand = mod.ModelNew(*init)
    for trial in range(trials):
        torch.manual_seed(1234 + trial)  # fresh random inputs per trial
        inputs = ref.get_inputs()
        with torch.no_grad():
            want = flatten_outputs(model(*inputs))
            got = flatten_outputs(cand(*inputs))
        for o, (g, w) in enumerate(zip(got, want, strict=True)):
            if g.shape != w.shape or g.dtype != w.dtype:
                return False, f"trial {trial} output {o}: {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}"
            if not w.is_floating_point():
                if not bool((g == w).all()):
                    return False, f"trial {trial} output {o}: {int((g != w).sum())} integer mismatches"
            elif not torch.allclose(g.double(), w.double(), atol=1e-4, rtol=1e-4):
                err = float((g.double() - w.double()).abs().max())
                return False, f"trial {trial} output {o}: max abs error {err:.3g}"
    return True, "ok"


def run_on_interpreter(workdir: Path, cases: Mapping[str, tuple[str, str | None]]) -> dict[str, dict[str, Any]]:
    """Check each (reference source, candidate source) in one interpreter subprocess (its start-up dominates
    the cost); a case without a candidate is left out. Returns {name: {"ok": bool, "detail": str}}."""
    listed = []
    for name, (reference, candidate) in cases.items():
        if candidate is None:
            continue
        (workdir / f"{name}_ref.py").write_text(reference)
        (workdir / f"{name}_cand.py").write_text(candidate)
        listed.append({"name": name, "problem": str(workdir / f"{name}_ref.py"),
                       "candidate": str(workdir / f"{name}_cand.py")})
    (workdir / "cases.json").write_text(json.dumps(listed))
    proc = subprocess.run([sys.executable, __file__, str(workdir / "cases.json")], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    from tritonsmith.evaluator._tensorcores import emulate_tensor_cores

    emulate_tensor_cores()  # tl.dot as the GPU's tensor cores compute it (tf32 inputs, tf32x3), as the evaluator does
    cases = json.loads(Path(sys.argv[1]).read_text())
    out = {}
    for c in cases:
        try:
            ok, detail = check(Path(c["problem"]), Path(c["candidate"]))
        except Exception:  # a candidate that crashes is a failed case, reported with its traceback
            ok, detail = False, traceback.format_exc(limit=3)
        out[c["name"]] = {"ok": ok, "detail": detail}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
