"""``tritonsmith memory ...`` commands, through typer's runner."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from tritonsmith.memory._seeds import SEED_DIR
from tritonsmith.cli.memory import memory_app

runner = CliRunner()


def _run(*args: str) -> str:
    res = runner.invoke(memory_app, list(args), env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output + repr(res.exception)
    return res.output


def test_seed_search_list_show_stats_export_import(tmp_path: Path) -> None:
    d = str(tmp_path / "store")
    assert "11 seed kernel(s) added" in _run("seed", "--dir", d)
    assert "0 seed kernel(s) added or updated, 11 already present" in _run("seed", "--dir", d)
    out = _run("search", str(SEED_DIR / "attention_problem.py"), "--dir", d, "-k", "2")
    assert out.splitlines()[0].split()[1] == "seed/attention"
    assert "seed/layer_norm" in _run("search", "layer norm with weight and bias", "--dir", d, "-k", "1")
    listing = _run("list", "--dir", d)
    ids = re.findall(r"\b[0-9a-f]{12}\b", listing)
    assert len(ids) == 11
    shown = _run("show", ids[0], "--dir", d)
    assert "@triton.jit" in shown and "status correct" in shown
    assert "11 records, 11 successes, 0 lessons" in _run("stats", "--dir", d)
    export = tmp_path / "all.jsonl"
    assert "11 record(s) written" in _run("export", str(export), "--dir", d)
    assert "11 record(s) added or updated, 0 duplicate(s)" in _run("import", str(export), "--dir",
                                                                     str(tmp_path / "other"))


def test_show_unknown_id_fails(tmp_path: Path) -> None:
    res = runner.invoke(memory_app, ["show", "deadbeef", "--dir", str(tmp_path / "s")])
    assert res.exit_code == 1 and "no record matches" in res.output
