"""``tritonsmith bench`` / ``report`` through typer's runner: run.json holds every result-changing setting,
a resume with other settings is refused, reports say why a cell has no number, files are 0644."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritonsmith.cli import app
from tritonsmith.examples import example_path

HERE = Path(__file__).resolve().parent


@pytest.fixture
def flat(tmp_path: Path) -> Path:
    """Two problems in a directory with no level in its name."""
    root = tmp_path / "problems"
    root.mkdir()
    reference = example_path("softmax_reference.py").read_text()
    for name in ("1_first", "2_second"):
        (root / f"{name}.py").write_text(reference)
    return root


def _bench(root: Path, out: Path, *extra: str) -> tuple[int, str]:
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]), "COLUMNS": "300",
           "SLOW_PID_FILE": str(out.parent / "unused.pid")}
    res = CliRunner().invoke(app, ["bench", str(root), "--device", "cpu", "--workers", "1", "--trials", "1",
                                   "--optimize-fn", "slow_optimize:slow_optimize", "--out", str(out), *extra], env=env)
    return res.exit_code, res.output


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_cpu_run_reports_unmeasured_speed_one_scope_row_a_plot_note_and_0644_files(flat: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    code, text = _bench(flat, out)
    assert code == 0, text
    assert "speed unmeasured (CPU)" in text and "no level" not in text
    md = (out / "report.md").read_text()
    assert "no level" not in md
    assert "| `1_first` |  | correct | unmeasured (CPU) | unmeasured (CPU) | unmeasured (CPU) |" in md
    assert "No plots: they show speedups, and nothing in this run was timed on a GPU." in md
    umask = os.umask(0)
    os.umask(umask)
    want = 0o666 & ~umask
    for name in ("report.json", "report.md", "run.json", "results.jsonl"):
        assert _mode(out / name) == want, name


def test_run_json_holds_the_settings_and_a_resume_with_other_settings_is_refused(flat: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _bench(flat, out, "--scale")[0] == 0
    manifest = json.loads((out / "run.json").read_text())
    assert {k: manifest[k] for k in ("mode", "device", "generator", "iterations")} == {
        "mode": "optimize", "device": "cpu", "generator": "builtin", "iterations": 3}
    assert manifest["settings"] == {"trials": 1, "tolerance": "kernelbench", "policy": "hybrid", "scale": True,
                                    "use_memory": False}
    from tritonsmith.core.version import code_version

    assert manifest["version"] == code_version()
    before = (out / "results.jsonl").read_text()

    code, text = _bench(flat, out)  # without --scale: its results would mix with scaled ones
    assert code == 2
    assert "holds a run started with other settings (scale: was True, now False)" in text
    assert "--force-new" in text and "another --out" in text
    assert (out / "results.jsonl").read_text() == before and json.loads((out / "run.json").read_text()) == manifest

    code, text = _bench(flat, out, "--scale")  # the same settings: resumes, reruns nothing
    assert code == 0 and "resuming: 2 problems already finished, 0 to run" in text
    assert (out / "results.jsonl").read_text() == before

    code, text = _bench(flat, out, "--force-new")
    assert code == 0, text
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("run.replaced-")]
    assert len(aside) == 1 and (aside[0] / "results.jsonl").read_text() == before  # kept, not deleted
    assert json.loads((out / "run.json").read_text())["settings"]["scale"] is False


def test_an_old_run_json_without_a_version_is_not_resumed(flat: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _bench(flat, out)[0] == 0
    manifest = json.loads((out / "run.json").read_text())
    del manifest["version"]
    (out / "run.json").write_text(json.dumps(manifest))
    code, text = _bench(flat, out)
    assert code == 2 and "version: was 'unknown'" in text


def test_report_of_a_directory_that_is_no_run_says_what_a_run_is(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["report", str(tmp_path)], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "is not a run directory (no results.jsonl)" in res.output
    assert "tritonsmith bench" in res.output
