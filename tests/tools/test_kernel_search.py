"""search_kernels and its LangChain tool."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "memory"))

from memhelp import PROBLEMS, make_record  # noqa: E402

from tritonsmith.core.problem import Problem  # noqa: E402
from tritonsmith.memory import InMemoryKernelMemory, RecordKind, SearchFilters  # noqa: E402
from tritonsmith.tools.kernel_search import make_kernel_search_tool, search_kernels  # noqa: E402


def _memory() -> InMemoryKernelMemory:
    mem = InMemoryKernelMemory()
    mem.add_many([make_record("softmax", 1, speedup=2.0, device_name="NVIDIA H200"),
                  make_record("conv_relu", 1), make_record("gemm_gelu", 1),
                  make_record("conv_relu", 2, kind=RecordKind.LESSON)])
    return mem


def test_ok_by_problem_with_code_speedups_and_reasons() -> None:
    res = search_kernels(problem=Problem.from_source(PROBLEMS["softmax"], name="q"), k=2, memory=_memory(),
                         device_name="NVIDIA H200")
    assert res.status == "ok" and len(res.examples) == 2
    top = res.examples[0]
    assert top.problem_name == "softmax" and top.speedup_vs_eager == 2.0 and top.device_name == "NVIDIA H200"
    assert "_softmax_kernel" in top.code and "same device class" in top.reason
    prompt = res.to_prompt()
    assert "### Example 1: softmax" in prompt and "2.00x vs eager" in prompt


def test_by_text_and_lessons_never_come_back() -> None:
    res = search_kernels("convolution then relu", k=5, memory=_memory())
    assert res.ok
    assert all(e.problem_name != "conv_relu" or "VARIANT = 1" in e.code for e in res.examples)
    assert res.examples[0].problem_name == "conv_relu"


def test_budget_is_respected_and_code_is_cut_last_first() -> None:
    mem = InMemoryKernelMemory()
    long = make_record("softmax", 1)
    mem.add(long.__class__(**{**long.__dict__, "kernel_source": long.kernel_source + "# pad\n" * 2000}))
    mem.add(make_record("gemm_gelu", 1))
    res = search_kernels(PROBLEMS["softmax"], k=2, memory=mem, budget=3000)
    assert res.ok and len(res.to_prompt()) <= 3000
    assert res.examples[0].truncated and res.examples[0].code.endswith("# ...")


def test_invalid_and_empty() -> None:
    assert search_kernels(None, memory=_memory()).status == "invalid"
    assert search_kernels("  ", memory=_memory()).status == "invalid"
    assert search_kernels("softmax", k=0, memory=_memory()).status == "invalid"
    empty = search_kernels("softmax", memory=InMemoryKernelMemory())
    assert empty.status == "empty" and "from scratch" in empty.to_prompt()
    none = search_kernels("softmax", memory=_memory(), filters=SearchFilters(level=3))
    assert none.status == "empty"


def test_unavailable_memory_is_a_status(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TRITONSMITH_MEMORY_DIR", str(blocker / "store"))
    monkeypatch.delenv("TRITONSMITH_MEMORY_URL", raising=False)
    res = search_kernels("softmax")
    assert res.status == "unavailable" and "kernel memory unavailable" in res.message


def test_langchain_tool() -> None:
    tool = make_kernel_search_tool(_memory(), device_name="NVIDIA H200")
    assert tool.name == "kernel_search" and "query" in tool.args
    out = tool.invoke({"query": PROBLEMS["gemm_gelu"], "k": 1})
    assert "### Example 1: gemm_gelu" in out and "_gemm_gelu_kernel" in out
    assert "k must be between 1 and 20" in tool.invoke({"query": "x", "k": 50})


def test_default_tool_opens_the_default_memory_on_first_call(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("TRITONSMITH_MEMORY_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("TRITONSMITH_MEMORY_URL", raising=False)
    tool = make_kernel_search_tool()
    assert not (tmp_path / "store").exists()  # building the tool opened nothing
    out = tool.invoke({"query": "scaled dot-product attention", "k": 2})
    assert "seed/attention" in out and "@triton.jit" in out
