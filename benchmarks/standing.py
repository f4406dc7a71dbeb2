"""Where the built-in generator stands on a set of problems, taking each problem's newest record (issue 19).

    python benchmarks/standing.py RESULTS [RESULTS ...] [--levels 1 2] [--floor 0.9] [--json OUT.json]

RESULTS are suite run folders or ``results.jsonl`` files (``benchmarks/results/*/``). For every problem key the
record that finished last (``finished_at``) is kept, whichever folder holds it; a problem that was never
recorded does not count. Prints one row per problem (ours ms, torch.compile ms, ratio, device, date, folder),
then the summary: verified, geomean vs torch.compile over the verified ones and over all (a missing or failed
one as 1.0x), and the kernels below the floor.

When the kept records come from more than one device kind the summary says so: ratios measured on an H100 and
an H200 are each honest, but their geomean is an estimate, not a record of one machine.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from tritonsmith.suite.results import ProblemRecord  # noqa: E402


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out.extend(sorted(p.rglob("results.jsonl")))
        else:
            raise SystemExit(f"standing: {p} is neither a results.jsonl nor a folder holding one")
    if not out:
        raise SystemExit("standing: no results.jsonl under the given paths")
    return out


def newest(paths: list[Path], levels: set[int]) -> dict[str, tuple[ProblemRecord, dict[str, Any], Path]]:
    """Each problem key's record with the latest ``finished_at``, with its raw line and its file."""
    kept: dict[str, tuple[ProblemRecord, dict[str, Any], Path]] = {}
    for f in _files(paths):
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            raw = json.loads(line)
            if raw.get("level") not in levels:
                continue
            rec = ProblemRecord.from_dict(raw)
            old = kept.get(rec.key)
            if old is None or (raw.get("finished_at") or "") >= (old[1].get("finished_at") or ""):
                kept[rec.key] = (rec, raw, f)
    return kept


def _row(rec: ProblemRecord, raw: dict[str, Any], f: Path) -> dict[str, Any]:
    bench = ((raw.get("result") or {}).get("benchmark") or {})
    ms = lambda k: (bench.get(k) or {}).get("median_ms")  # noqa: E731
    return {"key": rec.key, "status": rec.status, "ours_ms": ms("candidate"), "compile_ms": ms("compiled"),
            "vs_compile": rec.speedup_vs_compile, "vs_eager": rec.speedup_vs_eager,
            "device": (raw.get("result") or {}).get("device_name") or "", "finished_at": raw.get("finished_at") or "",
            "source": str(f.parent.relative_to(REPO) if f.is_relative_to(REPO) else f.parent)}


def summary(rows: list[dict[str, Any]], total: int | None, floor: float) -> dict[str, Any]:
    ok = [r for r in rows if r["status"] == "correct" and r["vs_compile"]]
    n = total if total is not None else len(rows)
    logs = [math.log(r["vs_compile"]) for r in ok]
    return {"problems": n, "recorded": len(rows), "verified": len(ok),
            "geomean_verified": math.exp(sum(logs) / len(logs)) if logs else None,
            "geomean_all": math.exp(sum(logs) / n) if n else None,
            "below_floor": sorted(((r["key"], round(r["vs_compile"], 3)) for r in ok if r["vs_compile"] < floor),
                                  key=lambda kv: kv[1]),
            "devices": sorted({r["device"] for r in ok}), "floor": floor}


def markdown(rows: list[dict[str, Any]], s: dict[str, Any]) -> str:
    lines = ["| problem | status | ours ms | compile ms | vs compile | device | finished | folder |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["key"]):
        f = lambda v, d=3: "" if v is None else f"{v:.{d}f}"  # noqa: E731
        lines.append(f"| {r['key'][:48]} | {r['status']} | {f(r['ours_ms'])} | {f(r['compile_ms'])} "
                     f"| {f(r['vs_compile'], 2)} | {r['device'].replace('NVIDIA ', '')} | {r['finished_at'][:16]} "
                     f"| {r['source']} |")
    g = lambda v: "n/a" if v is None else f"{v:.3f}x"  # noqa: E731
    mixed = " (mixed devices: an estimate, not one machine's record)" if len(s["devices"]) > 1 else ""
    lines += ["", f"verified {s['verified']} of {s['problems']} ({s['recorded']} recorded); geomean vs torch.compile "
              f"{g(s['geomean_verified'])} over the verified, {g(s['geomean_all'])} over all {s['problems']} "
              f"(a missing or failed one as 1.0x){mixed}; devices: {', '.join(s['devices']) or 'none'}",
              f"{len(s['below_floor'])} verified below {s['floor']}x: "
              + ", ".join(f"{k.split('/')[0][-1]}/{k.split('/')[1].split('_')[0]} {v:.2f}" for k, v in s["below_floor"])]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="suite run folders or results.jsonl files")
    ap.add_argument("--levels", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--total", type=int, help="problems in scope (default: those recorded); 100 for the dev L1+2")
    ap.add_argument("--floor", type=float, default=0.9)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = [_row(*v) for v in newest(args.results, set(args.levels)).values()]
    if args.total is not None and args.total < len(rows):
        raise SystemExit(f"standing: --total {args.total} is less than the {len(rows)} problems recorded")
    s = summary(rows, args.total, args.floor)
    print(markdown(rows, s))
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "summary": s, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
