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
from tritonsmith.evaluator import evaluate
from tritonsmith.examples import example_path

app = typer.Typer()
app.command("optimize")(optimize_command)
app.command("noop")(lambda: None)  # two commands keep typer from collapsing the app into one command


def test_optimize_writes_a_kernel_our_evaluator_accepts_as_is(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["optimize", "example:softmax_reference.py", "--device", "cpu", "--trials", "1",
                                   "--no-memory", "--generator", "builtin", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "iter 1 [builtin]" in res.output and "correct" in res.output and "speed unmeasured" in res.output
    kernel, ref_copy, check = (out / "softmax_reference_triton.py", out / "softmax_reference_reference.py",
                               out / "check_softmax_reference.py")
    assert f"check it: tritonsmith eval {ref_copy} {kernel}" in res.output
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "verified" and report["generator"] == "builtin" and report["ok"] is True
    assert report["attempts"][0]["reward_basis"] == "unmeasured"
    md = (out / "report.md").read_text()
    assert "| 1 | builtin | default | correct | unmeasured (CPU) | 0.500 |" in md
    assert f"tritonsmith eval {ref_copy} {kernel}" in md
    reference = ref_copy
    assert kernel.read_text() == report["best_source"].rstrip() + "\n"  # the verified source, verbatim

    # The written file is the verified source: the evaluator accepts it as is.
    verdict = evaluate(example_path("softmax_reference.py"), kernel, device="cpu", trials=2)
    assert verdict.status.value == "correct", verdict.feedback()
    assert "__main__" not in kernel.read_text()

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(check)], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "max abs error vs the reference" in run.stdout and "(ok)" in run.stdout
    again = CliRunner().invoke(tritonsmith_app, ["eval", str(reference), str(kernel), "--device", "cpu", "--trials", "2"])
    assert again.exit_code == 0, again.output  # a file we write passes our own eval

    # --from reads the written file back: the user's kernel is evaluated first and verified as it stands.
    again = tmp_path / "again"
    res = CliRunner().invoke(app, ["optimize", "example:softmax_reference.py", "--device", "cpu", "--trials", "1",
                                   "--no-memory", "--generator", "builtin", "--from", str(kernel),
                                   "--out", str(again)])
    assert res.exit_code == 0, res.output
    first = json.loads((again / "report.json").read_text())["attempts"][0]
    assert (first["generator"], first["status"]) == ("user", "correct")


def test_the_check_script_says_check_for_a_wrong_kernel(tmp_path, softmax_candidate):
    from tritonsmith.graphs._report import check_script

    (tmp_path / "ref.py").write_text(example_path("softmax_reference.py").read_text())
    (tmp_path / "k.py").write_text(softmax_candidate.replace("out = num / tl.sum(num, axis=0)",
                                                             "out = num / (tl.sum(num, axis=0) + 1.0)"))
    (tmp_path / "check_k.py").write_text(check_script(reference_file="ref.py", kernel_name="k.py"))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(tmp_path / "check_k.py")], capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 1 and "(CHECK)" in run.stdout, run.stdout + run.stderr[-2000:]


def test_llm_without_a_key_exits_2_with_what_to_configure(tmp_path):
    res = CliRunner().invoke(app, ["optimize", "example:softmax_reference.py", "--device", "cpu",
                                   "--generator", "llm", "--no-memory", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "OPENAI_API_KEY" in res.output and "--base-url" in res.output


LSE_REFERENCE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=1) * 2.0 + 1.0


def get_inputs():
    return [torch.randn(37, 129)]


def get_init_inputs():
    return []
'''

LSE_HYBRID = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = 2 x + 1"""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        lse = torch.logsumexp(x, dim=1)
        out = torch.empty_like(lse)
        n = lse.numel()
        _affine_kernel[(triton.cdiv(n, 128),)](lse, out, n, BLOCK=128)
        return out
'''


def test_a_hybrid_kernel_says_what_torch_computed_on_the_cli_and_in_the_report(tmp_path):
    ref, kernel = tmp_path / "lse.py", tmp_path / "lse_hybrid.py"
    ref.write_text(LSE_REFERENCE)
    kernel.write_text(LSE_HYBRID)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["optimize", str(ref), "--device", "cpu", "--trials", "1", "--no-memory",
                                   "--generator", "builtin", "--from", str(kernel), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "torch computes: logsumexp" in res.output
    assert "verified (hybrid policy, torch computes: logsumexp)" in res.output
    md = (out / "report.md").read_text()
    assert "**hybrid kernel** (hybrid policy): torch computes: logsumexp" in md
    report = json.loads((out / "report.json").read_text())
    assert report["attempts"][0]["torch_ops"] == ["logsumexp"] and report["best_reward"] == 0.45


def test_memory_marks_a_hybrid_kernel_and_keeps_it_out_of_the_prompt_examples(tmp_path):
    from tritonsmith.graphs import optimize
    from tritonsmith.tools.ports import MemoryStore
    from tritonsmith.memory import InMemoryKernelMemory
    from tritonsmith.core.problem import Problem

    ref = tmp_path / "lse.py"
    ref.write_text(LSE_REFERENCE)
    memory = InMemoryKernelMemory()
    result = optimize(ref, start_from=LSE_HYBRID, generator="builtin", device="cpu", trials=1, memory=memory)
    assert result.ok and result.attempts[0].torch_ops == ("logsumexp",)
    (record,) = [h.record for h in memory.search(Problem.from_file(ref), k=5)]
    assert record.evaluation.torch_ops == ("logsumexp",) and record.metadata()["hybrid"] is True
    assert MemoryStore(memory).similar(Problem.from_file(ref), k=3) == []  # never a prompt example
