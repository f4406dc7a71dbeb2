"""Records: built from an EvalResult, ids that dedup, device classes, JSON round trip."""

from __future__ import annotations

from memhelp import PROBLEMS, kernel_text

from tritonsmith.core.problem import Problem
from tritonsmith.core.results import BenchmarkReport, EvalResult, EvalStatus, Timing
from tritonsmith.memory import KernelRecord, RecordKind, device_class, record_from_eval, record_id


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p20_ms=ms * 0.98, p80_ms=ms * 1.03, reps=100)


def _result(status: EvalStatus, device: str, name: str, bench: bool = True) -> EvalResult:
    report = BenchmarkReport(candidate=_timing(0.5), eager=_timing(1.5), compiled=_timing(0.75),
                             compile_mode="default") if bench else None
    return EvalResult(status=status, message="msg", problem="p", device=device, device_name=name,
                      tolerance="kernelbench", benchmark=report, versions={"torch": "2.11.0", "triton": "3.6.0"},
                      error=None if status is EvalStatus.CORRECT else "Traceback: boom")


def test_record_from_a_gpu_result_keeps_speedups_and_lineage() -> None:
    problem = Problem.from_source(PROBLEMS["softmax"], name="softmax", level=1)
    rec = record_from_eval(problem, kernel_text("s"), _result(EvalStatus.CORRECT, "cuda", "NVIDIA H200"),
                           parent_id="abc", iteration=4, generator="llm:gpt")
    assert rec.kind is RecordKind.SUCCESS and rec.problem_level == 1
    ev = rec.evaluation
    assert (ev.speedup_vs_eager, ev.speedup_vs_compile, ev.runtime_ms) == (3.0, 1.5, 0.5)
    assert (ev.torch_version, ev.triton_version, ev.tolerance) == ("2.11.0", "3.6.0", "kernelbench")
    assert (rec.lineage.parent_id, rec.lineage.iteration, rec.lineage.generator) == ("abc", 4, "llm:gpt")
    assert rec.device_class == "hopper"
    assert rec.signature.startswith("ops=") and "_softmax" in rec.signature
    assert KernelRecord.from_json(rec.to_json()) == rec


def test_interpreter_timings_are_never_recorded_and_failures_are_lessons() -> None:
    problem = Problem.from_source(PROBLEMS["conv_relu"], name="conv")
    ok = record_from_eval(problem, kernel_text("c"), _result(EvalStatus.CORRECT, "cpu", "CPU (Triton interpreter)"))
    assert ok.evaluation.speedup_vs_eager is None and ok.evaluation.runtime_ms is None
    bad = record_from_eval(problem, kernel_text("d"), _result(EvalStatus.WRONG_OUTPUT, "cuda", "NVIDIA H200", False))
    assert bad.kind is RecordKind.LESSON and bad.evaluation.error == "Traceback: boom"


def test_ids_ignore_comments_and_formatting_but_not_code_or_problem() -> None:
    k = "def f(x):\n    return x + 1\n"
    reformatted = "# a comment\ndef f( x ):\n    '''doc'''\n    return (x + 1)  # same\n"
    assert record_id(PROBLEMS["softmax"], k) == record_id(PROBLEMS["softmax"] + "\n# trailing\n", reformatted)
    assert record_id(PROBLEMS["softmax"], k) != record_id(PROBLEMS["softmax"], k.replace("1", "2"))
    assert record_id(PROBLEMS["softmax"], k) != record_id(PROBLEMS["conv_relu"], k)


def test_device_classes() -> None:
    assert device_class("NVIDIA H200") == device_class("NVIDIA H100 80GB HBM3") == "hopper"
    assert device_class("NVIDIA A100-SXM4-80GB") == "ampere"
    assert device_class("CPU (Triton interpreter, x86_64)") == "cpu"
    assert device_class("Some Future GPU 9") == "some-future-gpu-9"


def test_hybrid_kernels_are_marked_and_never_offered_as_pure_triton_examples(memory) -> None:
    from tritonsmith.memory import SearchFilters
    from tritonsmith.core.results import ChecksReport, TorchOpUse
    from tritonsmith.tools.kernel_search import search_kernels

    problem = Problem.from_source(PROBLEMS["softmax"], name="softmax")
    checks = ChecksReport(policy="hybrid", torch_ops=(TorchOpUse(op="logsumexp", origin="runtime"),))
    hybrid_result = EvalResult(status=EvalStatus.CORRECT, message="ok", problem="p", device="cpu", device_name="CPU",
                               tolerance="kernelbench", checks=checks)
    hybrid = record_from_eval(problem, kernel_text("hybrid"), hybrid_result)
    assert hybrid.evaluation.torch_ops == ("logsumexp",) and hybrid.evaluation.hybrid
    assert hybrid.metadata()["hybrid"] is True
    assert KernelRecord.from_json(hybrid.to_json()) == hybrid
    memory.add(hybrid)
    assert memory.search(problem, k=3)  # kernel_search still finds it, labelled
    labelled = search_kernels(problem=problem, k=3, memory=memory)
    assert "hybrid kernel: torch computes: logsumexp" in labelled.to_prompt()
    pure_only = search_kernels(problem=problem, k=3, memory=memory, filters=SearchFilters(pure_triton_only=True))
    assert pure_only.status == "empty"
    pure = record_from_eval(problem, kernel_text("pure"), _result(EvalStatus.CORRECT, "cpu", "CPU"))
    memory.add(pure)
    found = search_kernels(problem=problem, k=3, memory=memory, filters=SearchFilters(pure_triton_only=True))
    assert [e.id for e in found.examples] == [pure.id]
