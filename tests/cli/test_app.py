"""The ``tritonsmith`` app through typer's runner: options checked before anything runs, clear errors, help
texts with defaults, choices and an example, the run's first lines, piped output kept whole."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritonsmith.cli import app
from tritonsmith.examples import example_path

HERE = Path(__file__).resolve().parent
BROKEN_REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.matmul(x, torch.ones(3, 3))  # x has 7 columns: the forward raises


def get_inputs():
    return [torch.randn(5, 7)]


def get_init_inputs():
    return []
'''
COMMANDS = ["optimize", "eval", "bench", "report", "profile", "search-web", "memory"]


def _invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args), env=env)
    return res.exit_code, res.output


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "bad_matmul.py"
    path.write_text(BROKEN_REFERENCE)
    return path


def test_help_lists_commands_in_order_of_use_and_version() -> None:
    code, out = _invoke("--help", env={"COLUMNS": "200"})
    assert code == 0
    assert [c for c in re.findall(r"│ (\S+)\s", out) if c in COMMANDS] == COMMANDS
    code, out = _invoke("--version")
    assert code == 0 and re.fullmatch(r"tritonsmith \d+\.\d+\.\d+\S*\n", out)


@pytest.mark.parametrize("command", [["optimize"], ["eval"], ["bench"], ["report"], ["profile"], ["memory"],
                                     ["search-web"], *[["memory", sub] for sub in ("seed", "search", "list", "show",
                                                                                  "export", "import", "stats")]])
def test_every_help_has_an_example(command: list[str]) -> None:
    code, out = _invoke(*command, "--help", env={"COLUMNS": "200"})
    assert code == 0 and "Example: tritonsmith " + " ".join(command) in out, out


def test_help_shows_defaults_and_choices_and_states_each_differing_default() -> None:
    _, opt = _invoke("optimize", "--help", env={"COLUMNS": "200"})
    for shown in ("<auto|cuda|cpu>", "<auto|llm|builtin>", "<hybrid|strict>", "<kernelbench|numerics>",
                  "[default: (3)]", "[default: (5)]", "[default: (hybrid)]", "[default: memory]"):
        assert shown in opt, shown
    _, bench = _invoke("bench", "--help", env={"COLUMNS": "200"})
    assert "[default: builtin]" in bench and "(optimize: auto)" in bench
    assert "[default: no-memory]" in bench and "(optimize: on)" in bench
    assert "[default: 3]" in bench and "[default: 5]" in bench and "[default: hybrid]" in bench
    _, search = _invoke("memory", "search", "--help", env={"COLUMNS": "200"})
    assert "--code" in search and "print each kernel's source" in search


@pytest.mark.parametrize("args", [["--policy", "bogus"], ["--tolerance", "loose"], ["--device", "tpu"],
                                  ["--generator", "gpt"], ["--trials", "0"]])
def test_a_bad_option_is_refused_before_anything_runs(args: list[str]) -> None:
    code, out = _invoke("optimize", "example:softmax_reference.py", *args)
    assert code == 2 and "Invalid value" in out and "results:" not in out, out  # no banner: nothing ran


def test_a_bad_setting_from_the_environment_is_refused_before_anything_runs() -> None:
    code, out = _invoke("optimize", "example:softmax_reference.py", env={"TRITONSMITH_POLICY": "bogus"})
    assert code == 2 and "policy 'bogus' (from TRITONSMITH_POLICY) is not one of hybrid, strict" in out
    assert "results:" not in out


def test_a_directory_given_as_a_problem_says_so(tmp_path: Path) -> None:
    for command in (["optimize"], ["eval"], ["profile"]):
        extra = ["example:softmax_triton.py"] if command == ["eval"] else []
        code, out = _invoke(*command, str(tmp_path), *extra, env={"COLUMNS": "300"})
        assert code == 2 and f"{tmp_path} is a directory" in out and "tritonsmith bench" in out, out
        assert "file not found" not in out


def test_a_broken_reference_fails_up_front_as_eval_says_it(broken: Path, tmp_path: Path) -> None:
    code, ev = _invoke("eval", str(broken), str(example_path("softmax_triton.py")), "--device", "cpu", "--trials", "1")
    assert code == 2
    code, opt = _invoke("optimize", str(broken), "--device", "cpu", "--no-memory", "--out", str(tmp_path / "o"))
    assert code == 2, opt
    message = "error: bad_matmul: the reference forward raised RuntimeError: mat1 and mat2 shapes cannot be multiplied"
    assert message in ev and message in opt
    assert "iter " not in opt and not (tmp_path / "o").exists()  # nothing generated, nothing written


def test_bench_records_a_broken_reference_without_calling_the_generator(broken: Path, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
           "SLOW_PID_FILE": str(calls)}
    code, out = _invoke("bench", str(broken), "--device", "cpu", "--workers", "1", "--optimize-fn",
                        "slow_optimize:slow_optimize", "--out", str(tmp_path / "run"), env=env)
    assert code == 0, out
    row = json.loads((tmp_path / "run" / "results.jsonl").read_text())
    assert row["status"] == "invalid_problem" and "the reference forward raised RuntimeError" in row["message"]
    assert not calls.exists()


def test_the_first_lines_say_device_generator_memory_and_results_once_unwrapped(tmp_path: Path) -> None:
    out_dir = tmp_path / "with-a-rather-long-folder-name-so-that-lines-pass-eighty-columns"
    code, out = _invoke("optimize", "example:softmax_reference.py", "--device", "cpu", "--trials", "1",
                        "--out", str(out_dir))
    assert code == 0, out
    lines = out.splitlines()
    assert lines[1].startswith("  device cpu (Triton interpreter: correctness only, no timing); generator builtin "
                               "(no model configured: set OPENAI_API_KEY or --base-url to use one); 3 iterations")
    memory_dir = os.environ.get("TRITONSMITH_MEMORY_DIR")
    assert lines[2] == f"  memory: {memory_dir} (verified kernels are stored there; --no-memory runs without it)"
    assert lines[3] == f"  results: {out_dir}/"
    assert out.count("no model configured") == 1  # one note, not a log warning and a note
    assert any(line.startswith("  wrote ") and line.endswith("report.md") for line in lines)
    code, off = _invoke("optimize", "example:softmax_reference.py", "--device", "cpu", "--trials", "1",
                        "--no-memory", "--out", str(out_dir))
    assert code == 0 and off.splitlines()[2] == "  memory: off"


def test_an_unreachable_model_server_suggests_the_builtin_generator(tmp_path: Path) -> None:
    code, out = _invoke("optimize", "example:softmax_reference.py", "--device", "cpu", "--generator", "llm",
                        "--base-url", "http://127.0.0.1:9/v1", "--no-memory", "--out", str(tmp_path),
                        env={"TRITONSMITH_MAX_RETRIES": "0", "TRITONSMITH_LLM_TIMEOUT": "5", "COLUMNS": "300"})
    assert code == 1, out  # the run ended (its report is written) without a verified kernel
    assert "could not be reached" in out and "--generator builtin runs without a model" in out


def test_the_size_estimate_warns_before_a_long_cpu_evaluation_and_suggests_scale(tmp_path: Path) -> None:
    from tritonsmith.cli._precheck import precheck
    from tritonsmith.core.problem import Problem

    source = example_path("softmax_reference.py").read_text()
    big = re.sub(r"batch_size = \d+", "batch_size = 4096", re.sub(r"dim = \d+", "dim = 4093", source))
    assert big != source
    problem = Problem.from_source(big, name="big_softmax")
    check = precheck(problem, device="cpu", scale=False, trials=5)
    assert check.reference_s is not None and check.estimate_s is not None and check.estimate_s > 60
    assert "minutes in the Triton interpreter (5 trials); --scale shrinks its shapes" in " ".join(check.lines)
    tight = precheck(problem, device="cpu", scale=False, trials=5, timeout_s=30)
    assert "past the evaluator's 30 s limit (it would time out)" in " ".join(tight.lines)
    scaled = precheck(problem, device="cpu", scale=True, trials=5)
    assert scaled.estimate_s is not None and scaled.estimate_s < 60 and len(scaled.lines) == 1
    small = precheck(Problem.from_file(example_path("softmax_reference.py")), device="cpu", scale=False, trials=5)
    assert len(small.lines) == 1 and small.lines[0].startswith("  reference: runs (")


@pytest.mark.parametrize("args", [["--policy", "bogus"], ["--generator", "default"], ["--device", "tpu"]])
def test_bench_refuses_a_bad_option_before_finding_problems(args: list[str], tmp_path: Path) -> None:
    code, out = _invoke("bench", str(tmp_path / "nowhere"), *args, "--out", str(tmp_path / "run"))
    assert code == 2 and "Invalid value" in out and not (tmp_path / "run").exists(), out


def test_the_main_command_piped_says_no_model_once_and_keeps_lines_whole(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITONSMITH_", "OPENAI_"))}
    env.update(TRITONSMITH_MEMORY_DIR=str(tmp_path / "memory"), COLUMNS="80")
    done = subprocess.run([sys.executable, "-m", "tritonsmith.cli", "optimize", "example:softmax_reference.py",
                           "--device", "cpu", "--trials", "1", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    both = done.stdout + done.stderr
    assert both.count("no model configured") == 1, both
    header = done.stdout.splitlines()[1]
    assert len(header) > 80 and header.endswith("policy hybrid, tolerance kernelbench")  # not wrapped at 80
    assert f"  memory: {tmp_path / 'memory'} (verified kernels are stored there" in done.stdout


def test_a_piped_usage_error_stays_on_one_line(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    done = subprocess.run([sys.executable, "-m", "tritonsmith.cli", "optimize", str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 2
    line = next(line for line in done.stderr.splitlines() if "is a directory" in line)
    assert "To run every problem of a directory: tritonsmith bench" in line, done.stderr
