"""The seed library: verified Triton kernels for the core patterns, shipped in ``memory/seeds/``."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonsmith.core.problem import Problem
from tritonsmith.memory._record import Evaluation, KernelRecord, Lineage, RecordKind, record_id
from tritonsmith.memory._signature import problem_signature

if TYPE_CHECKING:
    from tritonsmith.memory._store import AddResult, KernelMemory

__all__ = ["SEED_DIR", "Seed", "load_seeds", "seed_memory", "seed_records"]

log = logging.getLogger(__name__)

SEED_DIR = Path(__file__).with_name("seeds")
NOT_MEASURED = "not measured"


@dataclass(frozen=True, kw_only=True)
class Seed:
    name: str
    family: str
    description: str
    problem_path: Path
    kernel_path: Path
    tolerance: str
    h200: dict[str, Any] | None  # None until measured on an H200

    @property
    def problem(self) -> Problem:
        return Problem.from_file(self.problem_path)

    @property
    def kernel_source(self) -> str:
        return self.kernel_path.read_text()


@lru_cache(maxsize=1)
def load_seeds() -> tuple[Seed, ...]:
    """The seeds listed in ``seeds/manifest.json``."""
    manifest = json.loads((SEED_DIR / "manifest.json").read_text())
    seeds = []
    for s in manifest["seeds"]:
        h200 = s.get("h200")
        seeds.append(Seed(name=s["name"], family=s["family"], description=s["description"],
                          problem_path=SEED_DIR / s["problem"], kernel_path=SEED_DIR / s["kernel"],
                          tolerance=s.get("tolerance", "kernelbench"),
                          h200=h200 if isinstance(h200, dict) else None))
    return tuple(seeds)


def _evaluation(seed: Seed) -> Evaluation:
    h = seed.h200
    if h is None:
        return Evaluation(status="correct", tolerance=seed.tolerance, device="cpu",
                          device_name="cpu (Triton interpreter)",
                          message="seed kernel, verified on the CPU through the Triton interpreter; "
                                  "no GPU measurement recorded")
    return Evaluation(
        status="correct", tolerance=seed.tolerance, device="cuda", device_name=h.get("device_name", "NVIDIA H200"),
        speedup_vs_eager=h.get("speedup_vs_eager"), speedup_vs_compile=h.get("speedup_vs_compile"),
        runtime_ms=h.get("runtime_ms"), eager_ms=h.get("eager_ms"), compile_ms=h.get("compile_ms"),
        torch_version=h.get("torch"), triton_version=h.get("triton"),
        message=f"seed kernel, measured by benchmarks/seed_library_gpu.py on {h.get('measured_at', '?')}",
    )


def seed_records() -> list[KernelRecord]:
    """One success record per seed (problem traced for its signature)."""
    records = []
    for seed in load_seeds():
        problem = seed.problem
        kernel = seed.kernel_source
        records.append(KernelRecord(
            id=record_id(problem.source, kernel), kind=RecordKind.SUCCESS, problem_name=f"seed/{seed.name}",
            problem_source=problem.source, signature=problem_signature(problem).text, kernel_source=kernel,
            evaluation=_evaluation(seed), lineage=Lineage(generator="seed"), origin="seed",
            tags=(f"family:{seed.family}", f"seed:{seed.name}"), created_at=0.0,
        ))
    return records


def manifest_digest() -> str:
    """Changes whenever the packaged seeds or their measurements change."""
    h = hashlib.sha256((SEED_DIR / "manifest.json").read_bytes())
    for seed in load_seeds():
        h.update(seed.problem_path.read_bytes())
        h.update(seed.kernel_path.read_bytes())
    return h.hexdigest()[:16]


def seed_memory(memory: KernelMemory) -> list[AddResult]:
    """Add the seed library to ``memory`` (idempotent: seeds already present are duplicates)."""
    return memory.add_many(seed_records())
