"""First candidate of every dev problem at full size: sources by problem, for a diff between two trees."""
import json, sys, time, hashlib
from pathlib import Path
from tritonsmith.core.problem import Problem
from tritonsmith.agents.builtin import BuiltinGenerator
from tritonsmith.agents.base import GenerationRequest
out = {}
root = Path(sys.argv[1])
for lv in ("level1", "level2", "level3"):
    for f in sorted((root / lv).glob("*.py"), key=lambda p: int(p.name.split("_")[0])):
        t0 = time.time()
        try:
            p = Problem.from_file(f)
            c = BuiltinGenerator().generate(GenerationRequest(problem=p, iteration=0, device="cuda"))
            src, note = c.source or "", c.note or ""
        except Exception as exc:
            src, note = "", f"EXC {type(exc).__name__}: {exc}"
        out[f"{lv}/{f.stem}"] = {"sha": hashlib.sha1(src.encode()).hexdigest()[:12], "note": note[:400], "s": round(time.time() - t0, 1)}
        Path(sys.argv[2]).write_text(json.dumps(out, indent=0))
print(len(out))
