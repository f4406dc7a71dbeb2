"""benchmarks/generalize_check.py takes a recorded results folder as its run folder."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from _scripts import load_script


def test_a_results_folder_is_unpacked_into_a_run_folder_with_only_its_kernels(tmp_path: Path) -> None:
    mod = load_script("generalize_check")
    results = tmp_path / "results"
    results.mkdir()
    (results / "results.jsonl").write_text('{"key": "level1/1_x"}\n')
    (results / "run.json").write_text("{}")
    with tarfile.open(results / "kernels_and_logs.tar.gz", "w:gz") as tar:
        for name, text in (("kernels/level1/1_x.py", "# kernel\n"), ("logs/worker.log", "log\n")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text.encode()))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = mod.as_run_dir(results, scratch)
    assert run != results and (run / "kernels" / "level1" / "1_x.py").read_text() == "# kernel\n"
    assert (run / "results.jsonl").read_text() == '{"key": "level1/1_x"}\n' and (run / "run.json").exists()
    assert not (run / "logs").exists()
    (results / "kernels").mkdir()  # a run folder proper is used as it is
    assert mod.as_run_dir(results, scratch) == results


def _run(folder: Path, problems: list[str], *, wrong: tuple[str, ...] = ()) -> Path:
    from tritonsmith.suite.results import ProblemRecord, RunStore

    store = RunStore(folder)
    for name in problems:
        status = "wrong_output" if name in wrong else "correct"
        store.append(ProblemRecord(key=f"level1/{name}", problem=name, level=1, status=status, message="",
                                   mode="builtin", device="cuda", candidate_file=f"kernels/level1/{name}.py"))
    return folder


def test_shards_cover_every_verified_kernel_once_and_a_later_run_does_not_check_a_problem_again(
        tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    import tritonsmith.evaluator._evaluate as ev

    mod = load_script("generalize_check")
    checked: list[str] = []

    def fake_evaluate(ref: Path, cand: Path, **kw: object) -> SimpleNamespace:
        assert kw["generalize"] is True and kw["benchmark"] is False
        checked.append(f"{cand.parent.parent.parent.name}:{ref.stem}")
        return SimpleNamespace(generalizes="yes", generalize_note="ok", message="", status=None)

    monkeypatch.setattr(ev, "evaluate", fake_evaluate)
    first = _run(tmp_path / "first", ["1_a", "2_b", "3_c", "4_d", "5_e"], wrong=("5_e",))
    second = _run(tmp_path / "second", ["2_b", "6_f", "7_g"])
    args = SimpleNamespace(out=None, resume=False, device="cuda", scale=False, timeout=10.0, only="")
    rows = [r for k in range(3) for r in mod.check_runs([first, second], tmp_path / "kb", args, (k, 3))]
    assert sorted(checked) == ["first:1_a", "first:2_b", "first:3_c", "first:4_d", "second:6_f", "second:7_g"]
    assert {r["problem"]: r["run"] for r in rows}["level1/2_b"] == "first"
    assert all(r["generalizes"] == "yes" for r in rows) and len(rows) == 6


def test_only_checks_the_chosen_problems(tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    import tritonsmith.evaluator._evaluate as ev

    mod = load_script("generalize_check")
    checked: list[str] = []
    monkeypatch.setattr(ev, "evaluate", lambda ref, cand, **kw: checked.append(ref.stem) or SimpleNamespace(
        generalizes="yes", generalize_note="ok", message="", status=None))
    run = _run(tmp_path / "run", ["2_b", "21_x", "3_c"])
    args = SimpleNamespace(out=None, resume=False, device="cuda", scale=False, timeout=10.0, only="level1/2,level1/3")
    mod.check_runs([run], tmp_path / "kb", args, (0, 1))
    assert checked == ["2_b", "3_c"]  # "level1/2" is problem 2, not 21
