"""Prompt size per request and per iteration of the LLM loop, on one problem, with a scripted model.

    .venv/bin/python benchmarks/prompt_tokens.py [--label NAME]

The same three-iteration conversation every time: iteration 1 searches the memory (seeded with the seed
library) and submits a kernel that divides by (sum + 1), iteration 2 submits a kernel with an unmasked
tail (wrong), iteration 3 submits the right kernel; each candidate is evaluated for real on the CPU
(Triton interpreter), so the feedback the model reads is the evaluator's. What every request sends is
counted in characters (message contents plus tool-call arguments; the tools' JSON schemas are not
counted) and in estimated tokens (characters / 4: no tokenizer is available offline; the ratio between versions is what counts).
Works on older checkouts too (only public API), so a "before" row can come from an earlier commit:

    git worktree add /tmp/before COMMIT && PYTHONPATH=/tmp/before/src .venv/bin/python benchmarks/prompt_tokens.py --label before

Appends to benchmarks/results/prompt_tokens.jsonl and prints a table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "prompt_tokens.jsonl"
WRONG_SUM = ("out = num / tl.sum(num, axis=0)", "out = num / (tl.sum(num, axis=0) + 1.0)")


def _chars(message: Any) -> int:
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    calls = getattr(message, "tool_calls", None) or []
    return len(content) + sum(len(json.dumps(c.get("args", {}))) for c in calls)


def main() -> int:
    import tritonsmith
    from tritonsmith.examples import example_path
    from tritonsmith.graphs import optimize
    from tritonsmith.graphs.testing import ScriptedChatModel, call_tool, submit
    from tritonsmith.memory import InMemoryKernelMemory, seed_memory

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    good = example_path("softmax_triton.py").read_text()
    wrong = good.replace(*WRONG_SUM)
    script = [call_tool("kernel_search", query="row softmax", k=2), submit(wrong, notes="first try"),
              submit(good.replace("mask=mask", "mask=None", 1), notes="no mask"), submit(good, notes="fixed")]
    model = ScriptedChatModel(script=script)
    memory = InMemoryKernelMemory()
    seed_memory(memory)
    result = optimize(example_path("softmax_reference.py"), model=model, memory=memory, device="cpu", trials=1,
                      iterations=3, profile=False)
    requests = [sum(_chars(m) for m in seen) for seen in model.seen]
    iteration_of = [1, 1, 2, 3][: len(requests)]
    per_iteration = {i: sum(c for c, it in zip(requests, iteration_of) if it == i) for i in (1, 2, 3)}
    record = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "label": args.label,
        "tritonsmith_src": str(Path(tritonsmith.__file__).parent), "commit": _commit(Path(tritonsmith.__file__)),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "statuses": [a.status for a in result.attempts], "request_chars": requests,
        "per_iteration_chars": per_iteration, "per_iteration_tokens_est": {k: v // 4 for k, v in per_iteration.items()},
        "total_chars": sum(requests), "total_tokens_est": sum(requests) // 4,
        "first_message_chars": [_chars(m) for m in model.seen[0]],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    print("| label | statuses | request chars | iteration 1 / 2 / 3 (est. tokens) | total (est. tokens) |")
    print("| --- | --- | --- | --- | --- |")
    it = record["per_iteration_tokens_est"]
    print(f"| {args.label} | {', '.join(record['statuses'])} | {requests} | {it[1]} / {it[2]} / {it[3]} | "
          f"{record['total_tokens_est']} |")
    return 0


def _commit(package_file: Path) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=package_file.parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
