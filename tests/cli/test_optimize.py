"""``tritonsmith optimize`` (the command as the lead wires it into the typer app)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import typer
from typer.testing import CliRunner

from tritonsmith.cli import app as tritonsmith_app
from tritonsmith.cli.optimize import optimize_command

app = typer.Typer()
app.command("optimize")(optimize_command)
app.command("noop")(lambda: None)  # two commands keep typer from collapsing the app into one command


def test_optimize_writes_a_runnable_kernel_and_reports(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["optimize", "example:softmax_reference.py", "--device", "cpu", "--trials", "1",
                                   "--no-memory", "--generator", "builtin", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "iter 1 [builtin]" in res.output and "correct" in res.output and "speed unmeasured" in res.output
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "verified" and report["generator"] == "builtin" and report["ok"] is True
    assert report["attempts"][0]["reward_basis"] == "unmeasured"
    md = (out / "report.md").read_text()
    assert "| 1 | builtin | default | correct | unmeasured (CPU) | 0.500 |" in md
    kernel, reference = out / "softmax_reference_triton.py", out / "softmax_reference_reference.py"
    assert kernel.read_text() == report["best_source"].rstrip() + "\n"  # the verified source, verbatim
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(out / "check_softmax_reference.py")], capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "max abs error vs the reference" in run.stdout and "(ok)" in run.stdout
    again = CliRunner().invoke(tritonsmith_app, ["eval", str(reference), str(kernel), "--device", "cpu", "--trials", "2"])
    assert again.exit_code == 0, again.output  # a file we write passes our own eval


def test_llm_without_a_key_exits_2_with_what_to_configure(tmp_path):
    res = CliRunner().invoke(app, ["optimize", "example:softmax_reference.py", "--device", "cpu",
                                   "--generator", "llm", "--no-memory", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "OPENAI_API_KEY" in res.output and "--base-url" in res.output
