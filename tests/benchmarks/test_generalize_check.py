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
