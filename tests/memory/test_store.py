"""The KernelMemory interface, on both backends: dedup, filters, lessons, ranking, export/import."""

from __future__ import annotations

from pathlib import Path

from memhelp import PROBLEMS, make_record

from tritonsmith.core.problem import Problem
from tritonsmith.memory import InMemoryKernelMemory, KernelMemory, KernelRecord, RecordKind, SearchFilters, record_id


def test_add_get_and_dedup(memory: KernelMemory) -> None:
    rec = make_record("softmax", 1)
    assert memory.add(rec).status == "added"
    # the same kernel, reformatted and commented, for the same problem: stored once
    same = make_record("softmax", 1)
    assert memory.add(same).status == "duplicate"
    assert memory.count() == 1
    got = memory.get(rec.id)
    assert got == rec
    assert memory.get("0" * 32) is None


def test_duplicate_with_new_measurement_replaces(memory: KernelMemory) -> None:
    plain = make_record("conv_relu", 3)
    measured = make_record("conv_relu", 3, speedup=1.8, device_name="NVIDIA H200")
    assert plain.id == measured.id
    memory.add(plain)
    assert memory.add(measured).status == "replaced"
    assert memory.add(plain).status == "duplicate"  # the unmeasured copy does not overwrite the measurement
    assert memory.count() == 1
    assert memory.get(plain.id).evaluation.speedup_vs_eager == 1.8  # type: ignore[union-attr]


def test_search_never_returns_lessons(memory: KernelMemory) -> None:
    memory.add(make_record("softmax", 1, kind=RecordKind.LESSON))
    assert memory.search(PROBLEMS["softmax"], k=3) == []
    memory.add(make_record("softmax", 2))
    hits = memory.search(PROBLEMS["softmax"], k=3)
    assert [h.record.kind for h in hits] == [RecordKind.SUCCESS]
    assert memory.list(SearchFilters(kind=RecordKind.LESSON))[0].evaluation.error == "output 0 mismatched"


def test_search_finds_the_same_kind_of_problem(memory: KernelMemory) -> None:
    memory.add_many([make_record(name) for name in PROBLEMS])
    for name, source in PROBLEMS.items():
        top = memory.search(Problem.from_source(source, name="q"), k=1)[0]
        assert top.record.problem_name == name
        assert "similarity" in top.reason
    text = memory.search("convolution followed by relu", k=1)[0]
    assert text.record.problem_name == "conv_relu"


def test_measured_speed_on_the_same_device_class_ranks_higher(memory: KernelMemory) -> None:
    slow = make_record("softmax", 1, speedup=1.2, device_name="NVIDIA H100 80GB HBM3")
    fast = make_record("softmax", 2, speedup=3.0, device_name="NVIDIA H200")
    other = make_record("softmax", 3, speedup=9.0, device_name="NVIDIA A100-SXM4-80GB")
    memory.add_many([slow, fast, other])
    hits = memory.search(PROBLEMS["softmax"], k=3, device_name="NVIDIA H200", one_per_problem=False)
    assert [h.record.id for h in hits] == [fast.id, slow.id, other.id]  # hopper first, the faster on top
    assert "same device class" in hits[0].reason and "3.00x vs eager" in hits[0].reason
    best = memory.search(PROBLEMS["softmax"], k=3, device_name="NVIDIA H200")
    assert [h.record.id for h in best] == [fast.id]  # one kernel per problem by default


def test_filters(memory: KernelMemory) -> None:
    memory.add_many([
        make_record("softmax", 1, speedup=2.5, device_name="NVIDIA H200", level=1, generator="llm"),
        make_record("softmax", 2, level=1),
        make_record("conv_relu", 1, speedup=1.1, device_name="NVIDIA A100", level=2),
        make_record("gemm_gelu", 1, kind=RecordKind.LESSON, level=2),
    ])
    names = lambda f: sorted(r.problem_name + str(r.lineage.iteration) for r in memory.list(f))  # noqa: E731
    assert names(SearchFilters(level=2)) == ["conv_relu1", "gemm_gelu1"]
    assert names(SearchFilters(device_class="hopper")) == ["softmax1"]
    assert names(SearchFilters(min_speedup=1.5)) == ["softmax1"]
    assert names(SearchFilters(measured_only=True)) == ["conv_relu1", "softmax1"]
    assert names(SearchFilters(kind=RecordKind.LESSON)) == ["gemm_gelu1"]
    assert names(SearchFilters(generator="llm")) == ["softmax1"]
    key = memory.list(SearchFilters(problem_name="conv_relu"))[0].problem_key
    assert names(SearchFilters(problem_key=key)) == ["conv_relu1"]
    hits = memory.search(PROBLEMS["conv_relu"], k=3, filters=SearchFilters(exclude_problem_key=key))
    assert "conv_relu" not in [h.record.problem_name for h in hits] and hits
    assert memory.search(PROBLEMS["softmax"], k=3, filters=SearchFilters(level=2, device_class="hopper")) == []


def test_delete(memory: KernelMemory) -> None:
    a, b = make_record("softmax", 1), make_record("softmax", 2)
    memory.add_many([a, b])
    assert memory.delete([a.id, "f" * 32]) == 1
    assert [r.id for r in memory.list()] == [b.id]


def test_export_import_round_trip(memory: KernelMemory, tmp_path: Path) -> None:
    recs = [make_record("softmax", 1, speedup=1.4, device_name="NVIDIA H200"),
            make_record("conv_relu", 2), make_record("gemm_gelu", 3, kind=RecordKind.LESSON)]
    memory.add_many(recs)
    path = tmp_path / "export.jsonl"
    assert memory.export_records(path) == 3
    fresh = InMemoryKernelMemory()
    assert [r.status for r in fresh.import_records(path)] == ["added"] * 3
    assert sorted(fresh.list(), key=lambda r: r.id) == sorted(recs, key=lambda r: r.id)
    assert [r.status for r in memory.import_records(path)] == ["duplicate"] * 3
    stats = fresh.stats()
    assert (stats.total, stats.successes, stats.lessons, stats.problems) == (3, 2, 1, 3)


def test_import_rejects_garbage(memory: KernelMemory, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "x"}\n')
    try:
        memory.import_records(path)
    except ValueError as exc:
        assert "bad.jsonl:1" in str(exc)
    else:
        raise AssertionError("an invalid export was accepted")


def _builtin(name: str, variant_key: str, speedup: float | None, device_name: str = "NVIDIA H100 80GB HBM3",
             generator: str = "builtin") -> KernelRecord:
    import dataclasses

    rec = make_record(name, variant=len(variant_key), speedup=speedup, device_name=device_name, generator=generator)
    source = f'"""Triton kernels for {name}.\n\nVariant: {variant_key} (why it was tried)\n"""\n' + rec.kernel_source
    ev = dataclasses.replace(rec.evaluation, speedup_vs_compile=speedup)
    return dataclasses.replace(rec, id=record_id(rec.problem_source, source), kernel_source=source, evaluation=ev)


def test_tuned_variants_are_this_problems_measured_builtin_variants_fastest_first(memory: KernelMemory) -> None:
    memory.add_many([_builtin("gemm_gelu", "default", 0.91), _builtin("gemm_gelu", "mm-128x128", 1.37),
                     _builtin("gemm_gelu", "mm-aligned+ieee", 1.02),
                     _builtin("gemm_gelu", "mm-64x64", 2.5, device_name="NVIDIA A100-SXM4-80GB"),  # another GPU class
                     _builtin("gemm_gelu", "mm-split", 3.0, generator="llm"),  # not the built-in generator's
                     _builtin("gemm_gelu", "mm-cpu", None, device_name="CPU (Triton interpreter)"),  # never timed
                     _builtin("softmax", "row-wide", 1.8)])  # another problem
    gemm = PROBLEMS["gemm_gelu"]
    assert memory.tuned_variants(gemm, "NVIDIA H100 PCIe") == ["mm-128x128", "mm-aligned+ieee", "default"]
    assert memory.tuned_variants(gemm, "NVIDIA A100 80GB PCIe") == ["mm-64x64"]
    assert memory.tuned_variants(gemm, "CPU (Triton interpreter)") == []
    # the same problem at other shapes is another problem: its tuning does not carry over
    assert memory.tuned_variants(gemm.replace("torch.randn(33, 65)", "torch.randn(35, 65)"), "NVIDIA H100") == []
