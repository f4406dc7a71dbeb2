"""benchmarks/standing.py: each problem's newest record wins across folders, and the summary's counts and
geomeans are those of the kept records (a failed or missing problem as 1.0x in the all-problems geomean)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tests.benchmarks._scripts import load_script

standing = load_script("standing")


def _record(key: str, status: str, ours: float, compiled: float, when: str, device: str) -> dict:
    t = lambda ms: {"median_ms": ms, "p20_ms": ms, "p80_ms": ms, "reps": 100}  # noqa: E731
    bench = {"candidate": t(ours), "compiled": t(compiled), "eager": t(2 * ours), "compile_mode": "default"}
    return {"key": key, "problem": key.split("/")[1], "level": int(key[5]), "status": status, "message": status,
            "mode": "optimize", "device": "cuda", "finished_at": when, "attempts": [],
            "result": None if status != "correct" else {"status": status, "message": status, "problem": key.split("/")[1], "device": "cuda",
                       "device_name": device, "tolerance": "kernelbench", "benchmark": bench}}


def _write(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_the_newest_record_of_each_problem_is_kept_and_summarised(tmp_path: Path) -> None:
    old = _write(tmp_path / "old", [_record("level1/3_a", "correct", 1.0, 0.5, "2026-12-06T10:00", "NVIDIA H200"),
                                    _record("level2/7_b", "correct", 1.0, 3.0, "2026-12-06T10:01", "NVIDIA H200"),
                                    _record("level3/9_c", "correct", 1.0, 9.0, "2026-12-06T10:02", "NVIDIA H200")])
    new = _write(tmp_path / "new", [_record("level1/3_a", "correct", 0.25, 0.5, "2026-12-07T09:00", "NVIDIA H100"),
                                    _record("level1/5_d", "no_candidate", 0, 0, "2026-12-07T09:01", "NVIDIA H100")])
    # the newer folder is named first: the timestamp, not the argument order, decides
    rows = [standing._row(*v) for v in standing.newest([new, old], {1, 2}).values()]
    by_key = {r["key"]: r for r in rows}
    assert set(by_key) == {"level1/3_a", "level2/7_b", "level1/5_d"}  # level 3 is out of scope
    assert math.isclose(by_key["level1/3_a"]["vs_compile"], 2.0)
    s = standing.summary(rows, total=4, floor=0.9)
    assert (s["verified"], s["recorded"], s["problems"]) == (2, 3, 4)
    assert math.isclose(s["geomean_verified"], math.sqrt(2.0 * 3.0))
    assert math.isclose(s["geomean_all"], (2.0 * 3.0) ** 0.25)
    assert s["below_floor"] == [] and len(s["devices"]) == 2
    assert "mixed devices" in standing.markdown(rows, s)


def test_a_slow_kernel_is_listed_below_the_floor(tmp_path: Path) -> None:
    run = _write(tmp_path / "run", [_record("level1/3_a", "correct", 1.0, 0.8, "2026-12-06T10:00", "NVIDIA H200")])
    rows = [standing._row(*v) for v in standing.newest([run], {1}).values()]
    s = standing.summary(rows, total=None, floor=0.9)
    assert s["below_floor"] == [("level1/3_a", 0.8)]
    assert "mixed devices" not in standing.markdown(rows, s)
