"""Scale a problem (as --scale does), emit one variant of the built-in generator for it, and evaluate it on the CPU."""
import sys, json
sys.path.insert(0, '/work/main/src')
from pathlib import Path
from tritonsmith.agents.builtin import _plan
from tritonsmith.agents.builtin._emit import emit_module
from tritonsmith.agents.builtin._variants import variant_menu
from tritonsmith.core.problem import Problem
from tritonsmith.evaluator import evaluate
key, outdir = sys.argv[1], Path(sys.argv[2])
outdir.mkdir(parents=True, exist_ok=True)
for f in sys.argv[3:]:
    try:
        prob = Problem.from_file(Path(f)).scaled(max_elements=1 << 19, max_flops=1 << 29)
    except Exception as exc:
        print(Path(f).stem, 'cannot scale:', str(exc)[:120], flush=True); continue
    traced, plan = _plan(prob, {}, None)
    v = next((v for v in variant_menu(plan) if v.key == key), None)
    if v is None:
        print(Path(f).stem, 'no variant', key, flush=True); continue
    if v.options:
        traced, plan = _plan(prob, v.options, None)
    src = emit_module(prob.name, prob.source, traced, plan, v.overrides, v.key)
    (outdir / f"{Path(f).stem}__{key}.py").write_text(src)
    (outdir / f"{Path(f).stem}__reference.py").write_text(prob.source)
    r = evaluate(prob, outdir / f"{Path(f).stem}__{key}.py", device="cpu", trials=3)
    print(Path(f).stem, key, r.status.value, r.message[:150], flush=True)
