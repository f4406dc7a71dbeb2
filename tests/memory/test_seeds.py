"""The seed library: every seed kernel passes the evaluator on the CPU interpreter; the manifest is honest."""

from __future__ import annotations

import json

import pytest

from tritonsmith.evaluator._evaluate import evaluate
from tritonsmith.memory import InMemoryKernelMemory, RecordKind, load_seeds, seed_memory, seed_records
from tritonsmith.memory._seeds import SEED_DIR

SEEDS = load_seeds()
PATTERNS = {"elementwise", "normalization", "reduction", "matmul", "conv", "attention"}


def test_the_library_covers_the_core_patterns() -> None:
    assert {s.family for s in SEEDS} == PATTERNS
    names = {s.name for s in SEEDS}
    assert {"softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm", "bmm_scale_relu"} <= names
    for s in SEEDS:
        assert s.problem_path.is_file() and s.kernel_path.is_file()
        assert "@triton.jit" in s.kernel_source and "class ModelNew" in s.kernel_source


@pytest.mark.parametrize("seed", SEEDS, ids=[s.name for s in SEEDS])
def test_seed_kernel_is_correct_on_the_interpreter(seed) -> None:  # noqa: ANN001
    result = evaluate(seed.problem, seed.kernel_path, device="cpu", scale=True, trials=2)
    assert result.ok, f"{result.status}: {result.message}\n{result.error}"
    assert result.correctness is not None and result.correctness.passed == 2


def test_a_broken_seed_is_caught() -> None:
    """The check above can fail: the same layer-norm kernel with the bias dropped is wrong."""
    seed = next(s for s in SEEDS if s.name == "layer_norm")
    broken = seed.kernel_source.replace("diff * rstd * w + b", "diff * rstd * w")
    assert broken != seed.kernel_source
    result = evaluate(seed.problem, broken, device="cpu", scale=True, trials=1)
    assert result.status.value == "wrong_output"


def test_manifest_reports_h200_figures_only_when_measured() -> None:
    manifest = json.loads((SEED_DIR / "manifest.json").read_text())
    for entry, rec in zip(manifest["seeds"], seed_records(), strict=True):
        h200 = entry["h200"]
        if h200 == "not measured":
            assert rec.evaluation.speedup_vs_eager is None and rec.evaluation.device == "cpu"
        else:
            assert {"speedup_vs_eager", "runtime_ms", "device_name", "measured_at"} <= set(h200)
            assert "H200" in h200["device_name"] and rec.device_class == "hopper"
            assert rec.evaluation.speedup_vs_eager == h200["speedup_vs_eager"]


def test_seeding_is_idempotent_and_searchable() -> None:
    mem = InMemoryKernelMemory()
    assert {r.status for r in seed_memory(mem)} == {"added"}
    assert {r.status for r in seed_memory(mem)} == {"duplicate"}
    assert mem.count() == len(SEEDS) and all(r.kind is RecordKind.SUCCESS for r in mem.list())
    top = mem.search((SEED_DIR / "rms_norm_problem.py").read_text(), k=1)[0]
    assert top.record.problem_name == "seed/rms_norm"
