"""The Ray pool on a local single-node Ray instance on the CPU (Ray >= 2.4x dropped ``local_mode``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from suite_problems import write_candidate, write_problem

from tritonsmith.suite.runner import SuiteSettings, discover_problems, match_candidates, run_suite

ray = pytest.importorskip("ray", reason="the Ray extra is not installed")

from tritonsmith.suite._ray_pool import RayPool  # noqa: E402


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    here = str(Path(__file__).resolve().parent)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, old) if p)  # Ray workers import suite_fakes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def test_ray_pool_runs_and_resumes_a_suite(local_ray: None, suite_dir: Path, tmp_path: Path) -> None:
    problems = discover_problems([suite_dir])
    settings = SuiteSettings(device="cpu", optimize_fn="suite_fakes:fake_optimize", generator="default")
    run = run_suite(problems[:2], tmp_path / "run", settings, pool=RayPool(device="cpu"))
    assert run.ran == 2 and all(r.worker.startswith("ray:") for r in run.records)
    run = run_suite(problems, tmp_path / "run", settings, pool=RayPool(device="cpu"))
    assert (run.ran, run.skipped) == (2, 2)
    assert {r.key: r.status for r in run.records} == {"level1/1_Relu": "correct", "level1/2_wrong_Add": "wrong_output",
                                                      "level1/10_Tanh": "correct", "level2/4_Scale": "correct"}


def test_ray_pool_scores_a_kernel_with_the_real_evaluator(local_ray: None, tmp_path: Path) -> None:
    refs = tmp_path / "refs" / "level1"
    write_problem(refs / "1_Relu.py", rows=5, cols=19)
    write_candidate(tmp_path / "cands" / "1_Relu.py", "tl.maximum(x, 0.0)")
    problems = match_candidates(discover_problems([refs]), tmp_path / "cands")
    run = run_suite(problems, tmp_path / "run", SuiteSettings(mode="eval", device="cpu", trials=1),
                    pool=RayPool(device="cpu"))
    (record,) = run.records
    assert record.status == "correct", record.message
    assert record.result is not None and record.result.device == "cpu"
