"""The built-in generator on whole models (KernelBench level 3), on the CPU: what it writes, how long it takes.

    python benchmarks/level3_cpu.py ../shared/kernelbench-dev/level3 [--check] [--check-timeout 240] \
        [--only NAME ...] [--variant KEY] [--out benchmarks/results/level3-cpu-DATE]

Per problem, in its own subprocess (bounded by --timeout): the built-in generator's first candidate for the
problem as given (trace + lower + partition + emit, wall-clock seconds) and its outcome: ``emitted`` (the
Triton kernel kinds and the torch ops kept under the hybrid policy), ``no_code`` (with the generator's reason,
which names the op) or ``error`` (a generator bug: the traceback is kept). With ``--check`` every problem the
generator can write is also written for the problem scaled down (``Problem.scaled()``) and run through the
evaluator on the Triton interpreter (correctness only: no speed is ever measured on the CPU). ``--variant``
writes that variant of the generator's menu instead of its first (a problem whose menu lacks it: ``no_code``).
Prints a table and writes level3_cpu.json / level3_cpu.md into --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _order(p: Path) -> tuple[int, str]:
    head = p.name.split("_", 1)[0]
    return (int(head) if head.isdigit() else 0, p.name)


def builds_like_reference(problem: Any, source: str) -> str:
    """Import the candidate (Triton interpreter) and build ModelNew and Model on the meta device: ``same
    parameters`` when their parameters and buffers have the same names and shapes, else what differs."""
    import importlib.util
    import tempfile

    import torch

    from tritonsmith.core.problem_meta import exec_reference

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("_l3_candidate", f.name)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # the candidate failed to import: that is the finding
        return f"import failed: {type(exc).__name__}: {exc}"
    ref = exec_reference(problem.source, problem.name)
    try:
        with torch.device("meta"):
            init = ref.get_init_inputs()
            want = {k: tuple(v.shape) for k, v in ref.Model(*init).state_dict().items()}
            got = {k: tuple(v.shape) for k, v in mod.ModelNew(*init).state_dict().items()}
    except RuntimeError:  # an __init__ that reads values (.item()): build both on the CPU
        init = ref.get_init_inputs()
        want = {k: tuple(v.shape) for k, v in ref.Model(*init).state_dict().items()}
        got = {k: tuple(v.shape) for k, v in mod.ModelNew(*init).state_dict().items()}
    if want != got:
        diff = sorted(set(want.items()) ^ set(got.items()))[:4]
        return f"parameters differ: {diff}"
    return "builds, same parameters"


# Hand-chosen smaller sizes for the problems Problem.scaled() cannot shrink (a classifier head fixed to
# 224x224 inputs, an assertion on the image size, BatchNorm needing more than one value per channel):
# ``name = value`` replaces a module-level assignment, ``old -> new`` a piece of text. Used with --hand.
HAND_SIZES: dict[str, list[str]] = {
    "5_AlexNet": ["batch_size = 2"],
    "11_VGG16": ["batch_size = 1"],
    "14_DenseNet121DenseBlock": ["batch_size = 2", "height, width = 224, 224 -> height, width = 24, 24"],
    "16_DenseNet201": ["batch_size = 1", "height, width = 224, 224 -> height, width = 64, 64"],
    "19_MobileNetV1": ["batch_size = 1"],
    "20_MobileNetV2": ["batch_size = 1"],
    "22_EfficientNetB0": ["batch_size = 1", "torch.rand(batch_size, 3, 224, 224) -> torch.rand(batch_size, 3, 64, 64)"],
    "23_EfficientNetB1": ["batch_size = 2", "input_shape = (3, 96, 96)"],
    "24_EfficientNetB2": ["batch_size = 2"],
    "25_ShuffleNetUnit": ["batch_size = 2", "height = 16", "width = 16"],
    "26_ShuffleNet": ["batch_size = 2", "height = 32", "width = 32"],
    "29_SwinMLP": ["batch_size = 1"],
    "30_SwinTransformerV2": ["batch_size = 1"],
    "33_VanillaRNN": ["batch_size = 8", "input_size = 96", "hidden_size = 80", "output_size = 40"],
    "35_LSTM": ["batch_size = 3", "sequence_length = 128", "hidden_size = 64", "num_layers = 2"],
    "45_UNetSoftmax": ["batch_size = 2", "height = 32", "width = 64", "features = 16"],
}


def hand_sized(problem: Any, edits: list[str]) -> Any:
    """``problem`` with the HAND_SIZES edits applied (each must match exactly once)."""
    import re

    from tritonsmith.core.problem import Problem

    src = problem.source
    for edit in edits:
        if " -> " in edit:
            old, new = edit.split(" -> ", 1)
            if src.count(old) != 1:
                raise ValueError(f"{problem.name}: {old!r} occurs {src.count(old)} times")
            src = src.replace(old, new)
        else:
            name = edit.split("=", 1)[0].strip()
            src, n = re.subn(rf"^{re.escape(name)}\s*=.*$", edit, src, flags=re.M)
            if n != 1:
                raise ValueError(f"{problem.name}: no single module-level {name} = ...")
    return Problem.from_source(src, name=problem.name, level=problem.level)


def _generate(problem: Any, variant: str | None) -> Any:
    """The generator's first candidate, or the candidate of menu entry ``variant``."""
    from tritonsmith.agents.base import Candidate, GenerationRequest
    from tritonsmith.agents.builtin import BuiltinGenerator, _write

    gen = BuiltinGenerator()
    if variant is None:
        return gen.generate(GenerationRequest(problem=problem, iteration=1, device="cpu"))
    state = gen._state(problem)
    chosen = next((v for v in state.menu or [] if v.key == variant), None)
    if chosen is None:
        return Candidate(source=None, note=f"no variant {variant} for this problem: {state.error or 'not on the menu'}")
    return Candidate(source=_write(problem, state, chosen)[2], note=f"variant {variant}: {chosen.why}", variant=variant)


def one(path: Path, check: bool, check_timeout: float, limits: tuple[int, int], hand: bool = False,
        variant: str | None = None) -> dict[str, Any]:
    """Generate (and optionally check) one problem in this process; returns its row."""
    import traceback

    from tritonsmith.core.problem import Problem

    problem = Problem.from_file(path)
    row: dict[str, Any] = {"problem": problem.name}
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        cand = _generate(problem, variant)
    except Exception:  # a generator bug: recorded as such (the graph records it as an `error` attempt)
        row.update(outcome="error", seconds=round(time.perf_counter() - t0, 2), detail=traceback.format_exc()[-1500:])
        return row
    row["seconds"] = round(time.perf_counter() - t0, 2)
    # CPU seconds of this process: what the generator costs on this CPU whatever else the shared machine runs
    row["cpu_seconds"] = round(time.process_time() - c0, 2)
    row["outcome"] = "emitted" if cand.source is not None else "no_code"
    row["detail"] = cand.note
    if cand.source is None or not check:
        return row
    from tritonsmith.core.problem import ProblemError
    from tritonsmith.evaluator._evaluate import evaluate

    try:
        if hand and problem.name in HAND_SIZES:  # sizes that keep the problem valid and the interpreter quick
            small = hand_sized(problem, HAND_SIZES[problem.name])
            row["scaling"] = "hand-sized: " + "; ".join(HAND_SIZES[problem.name])
        else:
            small = problem.scaled(max_elements=limits[0], max_flops=limits[1])
    except ProblemError as exc:
        row["check"] = "not scalable"
        row["check_message"] = f"{str(exc)[:200]}; {builds_like_reference(problem, cand.source)}"
        return row
    t1 = time.perf_counter()
    cand_small = _generate(small, variant)
    if cand_small.source is None:
        row["check"] = f"scaled problem not written: {cand_small.note}"
        return row
    result = evaluate(small, cand_small.source, device="cpu", trials=2, timeout_s=check_timeout)
    row["check"] = result.status.value
    row["check_message"] = result.message + (f" | {result.error.splitlines()[0]}" if result.error else "")
    row["check_seconds"] = round(time.perf_counter() - t1, 1)
    row["scaling"] = row.get("scaling") or result.scaling_note or small.scaling_note
    return row


def run_all(files: list[Path], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for f in files:
        budget = args.timeout + (args.check_timeout + 120 if args.check else 0)
        cmd = [sys.executable, __file__, "--one", str(f), "--check-timeout", str(args.check_timeout),
               "--max-elements", str(args.max_elements), "--max-flops", str(args.max_flops)]
        if args.check:
            cmd.append("--check")
        if args.hand:
            cmd.append("--hand")
        if args.variant:
            cmd += ["--variant", args.variant]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget,
                                  env={**os.environ, "TRITON_INTERPRET": "1"})
            lines = proc.stdout.strip().splitlines()
            row = json.loads(lines[-1]) if proc.returncode == 0 and lines else {
                "problem": f.stem, "outcome": "error", "seconds": round(time.perf_counter() - t0, 1),
                "detail": f"subprocess exit {proc.returncode}: {proc.stderr[-800:]}"}
        except subprocess.TimeoutExpired:
            row = {"problem": f.stem, "outcome": "timeout", "seconds": budget, "detail": f"over {budget:.0f} s"}
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(r: dict[str, Any]) -> str:
    detail = str(r.get("detail", "")).replace("\n", " ")
    check = f"{r.get('check', '')} {r.get('check_message', '') if r.get('check') != 'correct' else ''}"
    return f"{r['problem'][:36]:36s} {r['outcome']:8s} {r['seconds']:7.2f}s {check[:160]:60s} {detail[:120]}"


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    emitted = [r for r in rows if r["outcome"] == "emitted"]
    checked = [r for r in rows if r.get("check") == "correct"]
    lines = ["# Built-in generator on KernelBench level 3 (CPU)", "",
             f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
             f"- machine: {platform.node()} ({platform.machine()}, {os.cpu_count()} cores, CPU only, shared)",
             f"- command: `{command}`",
             f"- emitted {len(emitted)} of {len(rows)}; no_code {sum(r['outcome'] == 'no_code' for r in rows)}; "
             f"error {sum(r['outcome'] == 'error' for r in rows)}; timeout {sum(r['outcome'] == 'timeout' for r in rows)}",
             f"- slowest trace+lower+emit: {max((r['seconds'] for r in rows), default=0):.1f} s wall-clock, "
             f"{max((r.get('cpu_seconds', 0) for r in rows), default=0):.1f} s of CPU (the machine is shared: "
             f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end)",
             f"- checked correct on the interpreter (scaled): {len(checked)}", "",
             "| problem | outcome | seconds (wall / CPU) | interpreter check (scaled) | detail |", "|---|---|---|---|---|"]
    for r in rows:
        detail = str(r.get("detail", "")).replace("\n", " ").replace("|", "\\|")[:220]
        check = str(r.get("check", "")) + (f": {r.get('check_message', '')}" if r.get("check") not in (None, "correct")
                                           and r.get("check_message") else "")
        if r.get("scaling") and r.get("check") == "correct":
            check += f" ({r['scaling']})"
        lines.append(f"| {r['problem']} | {r['outcome']} | {r['seconds']:.1f} / {r.get('cpu_seconds', 0):.1f} | {check.replace('|', '/')[:300]} | {detail} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", type=Path)
    ap.add_argument("--one", type=Path)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--check-timeout", type=float, default=240.0)
    ap.add_argument("--hand", action="store_true", help="check the problems listed in HAND_SIZES at those sizes")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--variant", help="write this variant of the menu instead of the first")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--max-elements", type=int, default=1 << 16, help="scaling limit per tensor (Problem.scaled)")
    ap.add_argument("--max-flops", type=int, default=1 << 26, help="scaling limit on the forward's FLOPs")
    args = ap.parse_args()
    if args.one:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        print(json.dumps(one(args.one, args.check, args.check_timeout, (args.max_elements, args.max_flops),
                             args.hand, args.variant)))
        return
    if args.root is None:
        ap.error("give the level-3 folder")
    files = sorted(args.root.glob("*.py"), key=_order)
    if args.only:
        files = [f for f in files if any(o in f.stem for o in args.only)]
    rows = run_all(files, args)
    command = "python benchmarks/level3_cpu.py " + " ".join(sys.argv[1:])
    text = markdown(rows, command)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "level3_cpu.json").write_text(json.dumps(rows, indent=1))
        (args.out / "level3_cpu.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
