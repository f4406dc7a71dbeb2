"""The profiler on the CPU (counts, bound, ahead-of-time facts, isolation) and its text summary."""

from __future__ import annotations

import json
import stat
import textwrap
from pathlib import Path

import pytest

from tritonsmith.core.results import Timing
from tritonsmith.profiler._aot import KernelFacts
from tritonsmith.profiler._ncu import NcuKernel, NcuReport, parse_ncu_csv, run_ncu
from tritonsmith.profiler._sol import datasheet_ceilings, speed_of_light, work_count
from tritonsmith.profiler._torch_profile import summarize_kernels
from tritonsmith.profiler.profile import (ImplProfile, ProfileReport, ProfileStatus, hint_codes, profile_kernel,
                                      summarize)

torch = pytest.importorskip("torch")

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn
    class Model(nn.Module):
        def __init__(self, divisor):
            super().__init__()
            self.divisor = divisor
        def forward(self, x):
            return torch.relu(x) / self.divisor
    ROWS = 300
    COLS = 1037
    def get_inputs():
        return [torch.rand(ROWS, COLS)]
    def get_init_inputs():
        return [3.0]
''')

TWO_KERNELS = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    @triton.jit
    def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)

    @triton.autotune(configs=[triton.Config({"BLOCK": 512}, num_warps=2), triton.Config({"BLOCK": 2048}, num_warps=8)],
                     key=["n"])
    @triton.jit
    def _div_kernel(x_ptr, y_ptr, n, d, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) / d, mask=m)

    class ModelNew(nn.Module):
        def __init__(self, divisor):
            super().__init__()
            self.divisor = divisor
        def forward(self, x):
            n = x.numel()
            y = torch.empty_like(x)
            _relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
            z = torch.empty_like(y)
            _div_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](y, z, n, self.divisor)
            return z
''')

N = 300 * 1037


def test_cpu_profile_counts_bound_and_ahead_of_time_facts() -> None:
    report = profile_kernel(PROBLEM, TWO_KERNELS, device="cpu")
    assert report.status is ProfileStatus.OK, report.message
    assert report.work is not None and report.work.flops == 0
    assert report.work.min_bytes == 2 * 4 * N
    assert report.sol is not None and report.sol.bound == "memory"
    assert report.sol.floor_ms == pytest.approx(2 * 4 * N / 4800e9 * 1e3)
    assert report.launches_per_forward == 2
    relu, div = report.compile_facts
    assert (relu.kernel, div.kernel) == ("_relu_kernel", "_div_kernel")
    assert relu.grid == ((N + 1023) // 1024,) and relu.constexprs["BLOCK"] == "1024"
    assert relu.registers and relu.spills == 0 and relu.num_warps == 4
    # no GPU to autotune on: the first config is compiled, and the count of configs is reported
    assert div.autotune_configs == 2 and div.constexprs["BLOCK"] == "512" and div.num_warps == 2
    assert div.signature["d"] == "fp32" and div.grid == ((N + 511) // 512,)
    assert "memory-bound" in report.summary
    assert "2 kernels where 1 would do" in report.summary
    assert "_relu_kernel x1" in report.summary
    assert report.impls == ()
    assert json.loads(json.dumps(report.to_dict()))["status"] == "ok"


def test_cpu_profile_of_the_reference_alone() -> None:
    report = profile_kernel(PROBLEM, None, device="cpu", target_gpu="NVIDIA H100 80GB HBM3")
    assert report.status is ProfileStatus.OK and report.compile_facts == ()
    assert report.ceilings is not None and report.ceilings.bandwidth_gbs == 3350.0
    assert "no timing on this device" in report.summary


def test_candidate_that_fails_to_import_is_a_status() -> None:
    report = profile_kernel(PROBLEM, "import torch\nraise RuntimeError('boom at import')\n", device="cpu")
    assert report.status is ProfileStatus.CANDIDATE_ERROR
    assert "boom at import" in (report.candidate_error or "")
    assert report.work is not None  # the counts survive a broken candidate
    assert report.summary.startswith("candidate failed")


def test_candidate_that_kills_its_process_does_not_take_the_caller_down() -> None:
    crash = TWO_KERNELS.replace("n = x.numel()", "import os; os._exit(7)")
    report = profile_kernel(PROBLEM, crash, device="cpu")
    assert report.status is ProfileStatus.CANDIDATE_ERROR
    assert "exit 7" in (report.candidate_error or "")


def test_launcher_needing_data_falls_back_to_scaled_cpu_tensors() -> None:
    needs_data = TWO_KERNELS.replace("n = x.numel()", "n = x.numel() + int(x.sum().item() * 0)")
    report = profile_kernel(PROBLEM, needs_data, device="cpu")
    assert report.status is ProfileStatus.OK, report.message
    assert any("scaled shapes" in n for n in report.notes)
    assert report.launches_per_forward == 2


def _gpu_report(**changes: object) -> ProfileReport:
    from tritonsmith.core.problem import Problem

    work = work_count(Problem.from_source(PROBLEM).inspect())
    ceilings = datasheet_ceilings("NVIDIA H200")
    assert ceilings is not None
    sol = speed_of_light(work, ceilings)
    measured_ms = sol.floor_ms / 0.41
    events = [("_relu_kernel", 0.0, 2.0), ("_div_kernel", 3.0, 5.0), ("_scale_kernel", 6.0, 8.0)]
    breakdown = summarize_kernels("candidate", events, {"_relu_kernel", "_div_kernel", "_scale_kernel"})
    cand = ImplProfile(label="candidate", timing=Timing(median_ms=measured_ms, p20_ms=measured_ms, p80_ms=measured_ms,
                                                        reps=10),
                       percent_of_sol=sol.percent(measured_ms), achieved_gbs=work.min_bytes / (measured_ms * 1e-3) / 1e9,
                       achieved_tflops=None, breakdown=breakdown)
    base = dict(status=ProfileStatus.OK, message="profiled", problem="p", device="cuda", device_name="NVIDIA H200",
                target="NVIDIA H200", work=work, ceilings=ceilings, sol=sol, impls=(cand,))
    base.update(changes)
    return ProfileReport(**base)  # type: ignore[arg-type]


def test_summary_names_the_bottleneck_and_the_next_step() -> None:
    text = summarize(_gpu_report())
    first = text.splitlines()[0]
    assert first.startswith("candidate: memory-bound at ")
    assert "= 41% of bandwidth" in first and "(41% of speed of light)" in first
    assert "3 kernels where 1 would do: fuse them" in text
    assert "3 kernel launches" in text
    assert hint_codes(text)[0] == "fuse_kernels"


def test_summary_reports_spills_counters_and_near_optimal() -> None:
    facts = (KernelFacts(kernel="_mm_kernel", target="sm_90", source="jit", registers=255, spills=3700,
                         local_bytes=14800, shared_bytes=131072, num_warps=1, num_stages=3, grid=(64,)),)
    ncu = NcuReport(status="ok", target="candidate", total_kernels=1,
                    kernels=(NcuKernel(name="_mm_kernel", duration_us=10.0, dram_pct=12.0, compute_pct=30.0,
                                       achieved_occupancy_pct=6.0, l2_hit_pct=80.0, registers=255.0),))
    text = summarize(_gpu_report(compile_facts=facts, ncu=ncu))
    assert "_mm_kernel spills (14800 B local memory per thread, 255 registers)" in text
    assert "runs 64 programs for 132 SMs" in text
    assert "ncu (candidate): _mm_kernel: 10.0 us, DRAM 12%, compute 30%, occupancy 6%, L2 hit 80%" in text
    near = _gpu_report()
    fast = near.impls[0]
    fast = ImplProfile(**{**fast.__dict__, "percent_of_sol": 91.0})
    near_text = summarize(_gpu_report(impls=(fast,)))
    assert "within 91% of the speed of light" in near_text
    assert hint_codes(near_text) == ("near_peak",)
    assert {"spills", "few_programs", "low_occupancy"} <= set(hint_codes(text))
    assert hint_codes("no hints line here") == ()


def test_summarize_kernels_shares_gaps_and_triton_split() -> None:
    events = [("_k", 0.0, 10.0), ("at::copy_kernel", 12.0, 22.0), ("_k", 30.0, 40.0), ("triton_poi_fused", 40.0, 60.0)]
    b = summarize_kernels("candidate", events, {"_k"})
    assert b.launches == 4 and b.distinct_kernels == 3
    assert b.kernel_us == 50.0 and b.triton_us == 40.0 and b.other_us == 10.0
    assert b.span_us == 60.0 and b.gap_us == 10.0
    assert [k.name for k in b.kernels] == ["_k", "triton_poi_fused", "at::copy_kernel"]
    assert b.kernels[0].launches == 2 and b.kernels[0].share == pytest.approx(0.4)
    assert b.triton_launches == 3


NCU_CSV = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python","host","_relu_kernel","1","7","(128, 1, 1)","(304, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","12.35"
"0","123","python","host","_relu_kernel","1","7","(128, 1, 1)","(304, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","81.2"
"0","123","python","host","_relu_kernel","1","7","(128, 1, 1)","(304, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Mbyte","1.24"
"0","123","python","host","_relu_kernel","1","7","(128, 1, 1)","(304, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","22"
"1","123","python","host","_div_kernel","1","7","(64, 1, 1)","(608, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","8,450"
"1","123","python","host","_div_kernel","1","7","(64, 1, 1)","(608, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","n/a"
==PROF== Disconnected from process 123
'''


def test_parse_ncu_csv_units_and_missing_values() -> None:
    relu, div = parse_ncu_csv(NCU_CSV)
    assert relu.name == "_relu_kernel" and relu.duration_us == pytest.approx(12.35)
    assert relu.dram_pct == pytest.approx(81.2) and relu.registers == 22
    assert relu.dram_read_bytes == pytest.approx(1.24e6)
    assert div.duration_us == pytest.approx(8.45) and div.achieved_occupancy_pct is None
    assert parse_ncu_csv("==ERROR== nothing") == []


def _fake_ncu(tmp_path: Path, body: str) -> str:
    path = tmp_path / "ncu"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_run_ncu_degrades_to_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text("{}")
    monkeypatch.setenv("TRITONSMITH_NCU", str(tmp_path / "missing-ncu"))
    missing = run_ncu(spec, target="candidate")
    assert missing.status == "unavailable" and "not found" in missing.note
    denied = run_ncu(spec, target="candidate", ncu=_fake_ncu(tmp_path, "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'\nexit 1\n"))
    assert denied.status == "failed" and "ERR_NVGPUCTRPERM" in denied.note
    hung = run_ncu(spec, target="candidate", timeout_s=1.0, ncu=_fake_ncu(tmp_path, "sleep 30\n"))
    assert hung.status == "timeout" and hung.wall_s < 5
    csv_file = tmp_path / "out.csv"
    csv_file.write_text(NCU_CSV)
    ok = run_ncu(spec, target="candidate", top=1, ncu=_fake_ncu(tmp_path, f"cat {csv_file}\n"))
    assert ok.status == "ok" and ok.total_kernels == 2 and [k.name for k in ok.kernels] == ["_relu_kernel"]


def test_ncu_job_starts_early_but_profiles_only_after_go(tmp_path: Path) -> None:
    """ncu's driver starts with the timing worker; nothing runs under ncu before the parent says go."""
    import sys
    import time

    from tritonsmith.profiler._ncu import NcuJob

    csv_file = tmp_path / "out.csv"
    csv_file.write_text(NCU_CSV)
    fake = tmp_path / "ncu"  # waits like the driver, records the word it got, then "profiles"
    fake.write_text(f"#!{sys.executable}\n"
                    "import json, sys, pathlib\n"
                    "from tritonsmith.profiler._ncu import wait_for_go\n"
                    "spec = json.loads(pathlib.Path(sys.argv[-1]).read_text())\n"
                    "pathlib.Path(spec['go_path']).with_name('started').write_text('yes')\n"
                    "word = wait_for_go(pathlib.Path(spec['go_path']), spec['go_timeout_s'])\n"
                    "pathlib.Path(spec['go_path']).with_name('seen').write_text(word)\n"
                    f"print(open({str(csv_file)!r}).read() if word != 'cancel' else '')\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    runs = []
    for word in ("reference", "cancel"):
        work = tmp_path / word
        work.mkdir()
        job = NcuJob({"problem_path": "p.py"}, work, timeout_s=60.0, ncu=str(fake))
        deadline = time.monotonic() + 30
        while not (work / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert (work / "started").exists() and not (work / "seen").exists()  # started, held at the go file
        runs.append(job.go(word) if word != "cancel" else job.cancel())
        assert (work / "seen").read_text() == word
        job.cancel()  # after go() or cancel(): nothing more to do (profile_kernel always calls it last)
        assert (work / "ncu.go").read_text() == word
    report = runs[0]
    assert report is not None and report.status == "ok" and report.target == "reference" and report.total_kernels == 2
    assert report.wall_s < 30


def test_gpu_profile_orchestration_overlaps_ncu_start_and_cancels_on_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing worker is faked: ncu (faked too) starts with it, profiles only after it, or is cancelled."""
    import sys

    from tritonsmith.core.problem import Problem
    from tritonsmith.profiler import profile as prof

    csv_file = tmp_path / "out.csv"
    csv_file.write_text(NCU_CSV)
    fake = tmp_path / "ncu"
    fake.write_text(f"#!{sys.executable}\n"
                    "import json, sys, pathlib\n"
                    "from tritonsmith.profiler._ncu import wait_for_go\n"
                    "spec = json.loads(pathlib.Path(sys.argv[-1]).read_text())\n"
                    "word = wait_for_go(pathlib.Path(spec['go_path']), spec['go_timeout_s'])\n"
                    f"pathlib.Path({str(tmp_path)!r}, 'words').open('a').write(word + '\\n')\n"
                    f"print(open({str(csv_file)!r}).read() if word != 'cancel' else '')\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("TRITONSMITH_NCU", str(fake))
    timing = {"median_ms": 1.0, "p20_ms": 0.9, "p80_ms": 1.1, "reps": 10}
    outcomes = iter([({"device_name": "fake GPU", "ceilings": None, "impls": {"eager": {"timing": timing}},
                       "candidate_error": {"message": "runtime_error", "error": "boom"}}, None, 2.5),
                     (None, "the profiling worker died", 0.0)])
    monkeypatch.setattr(prof, "_run_worker", lambda *a, **k: next(outcomes))
    prob = Problem.from_source(PROBLEM, name="relu_div")
    work = prof.work_count(prob.inspect())
    for _ in range(2):
        workdir = tmp_path / f"w{_}"
        workdir.mkdir()
        report = prof._profile_gpu(prob, work, TWO_KERNELS, workdir, ncu=True, compiled=False, timeout_s=30.0,
                                   seed=0)
        if _ == 0:  # the candidate failed in the worker: ncu profiles the reference instead
            assert report.status is prof.ProfileStatus.CANDIDATE_ERROR and "boom" in (report.candidate_error or "")
            assert report.ncu is not None and report.ncu.status == "ok" and report.ncu.target == "reference"
            assert report.stages_s["worker start"] == 2.5  # the wait for the zygote is reported, not hidden
        else:
            assert report.status is prof.ProfileStatus.CANDIDATE_ERROR and report.ncu is None
    assert (tmp_path / "words").read_text().split() == ["reference", "cancel"]


@pytest.mark.parametrize("device_node", [True, False])
def test_gpu_profile_prestarts_the_worker_before_loading_the_problem(monkeypatch: pytest.MonkeyPatch,
                                                                     device_node: bool) -> None:
    """On CUDA the worker zygote's imports start first, overlapping the problem's loading and counting;
    with an NVIDIA device node, even before the first CUDA call (seconds on a fresh machine)."""
    from tritonsmith.profiler import profile as prof

    calls: list[str] = []
    monkeypatch.setattr(prof, "gpu_likely", lambda: device_node)
    monkeypatch.setattr(prof, "resolve_device", lambda device: (calls.append("resolve"), "cuda")[1])
    monkeypatch.setattr(prof, "prestart_worker", lambda device: calls.append(f"prestart {device}"))
    real_load = prof.load_problem
    monkeypatch.setattr(prof, "load_problem", lambda p: (calls.append("load"), real_load(p))[1])

    def fake_gpu(prob, work, source, workdir, **kwargs):  # noqa: ANN001, ANN202, ANN003
        calls.append("profile")
        return ProfileReport(status=ProfileStatus.OK, message="profiled", problem=prob.name, device="cuda",
                             device_name="fake GPU", target="fake GPU", work=work, ceilings=None, sol=None)

    monkeypatch.setattr(prof, "_profile_gpu", fake_gpu)
    report = profile_kernel(PROBLEM, device="auto", ncu=False)
    first = ["prestart cuda", "resolve"] if device_node else ["resolve", "prestart cuda"]
    assert report.status is ProfileStatus.OK and calls == [*first, "load", "profile"]
    assert "load and count" in report.stages_s


def test_ncu_driver_exits_unprofiled_on_cancel_or_no_word(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    for word, timeout in (("cancel", 60.0), (None, 0.5)):
        spec = tmp_path / f"spec_{word}.json"
        go = tmp_path / f"go_{word}"
        spec.write_text(json.dumps({"problem_path": "/nonexistent.py", "go_path": str(go), "go_timeout_s": timeout}))
        if word:
            go.write_text(word)
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "tritonsmith.profiler._ncu", str(spec)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr  # returned before touching the (missing) problem or a GPU
        assert time.monotonic() - start < 60


def test_cli_profile_json(tmp_path: Path) -> None:
    typer = pytest.importorskip("typer")
    from typer.testing import CliRunner

    from tritonsmith.cli.profile import profile_command

    problem = tmp_path / "relu_div.py"
    problem.write_text(PROBLEM)
    app = typer.Typer()
    app.command("profile")(profile_command)
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, ["profile", str(problem), "--device", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["work"]["input_bytes"] == 4 * N and data["sol"]["bound"] == "memory"
    missing = CliRunner().invoke(app, ["profile", str(tmp_path / "nope.py"), "--device", "cpu"])
    assert missing.exit_code == 2 and "not found" in missing.output
    bundled = CliRunner().invoke(app, ["profile", "example:softmax_reference.py", "example:softmax_triton.py",
                                       "--device", "cpu", "--json"])  # as `tritonsmith eval` and `optimize` accept
    assert bundled.exit_code == 0, bundled.output
    assert [f["kernel"] for f in json.loads(bundled.output)["compile_facts"]] == ["_softmax_kernel"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_profile_end_to_end() -> None:
    report = profile_kernel(PROBLEM, TWO_KERNELS, device="cuda", ncu=True)
    assert report.status is ProfileStatus.OK, report.message
    cand = report.impl("candidate")
    assert cand is not None and cand.breakdown is not None and cand.breakdown.triton_launches == 2
    assert cand.percent_of_sol is not None and 0 < cand.percent_of_sol <= 105
    assert report.candidate_check and report.candidate_check["ok"]
    assert {f.kernel for f in report.compile_facts} == {"_relu_kernel", "_div_kernel"}
    assert all(f.registers for f in report.compile_facts)
    assert report.ncu is not None
    if report.ncu.status == "ok":
        assert report.ncu.kernels[0].duration_us


def test_langchain_profile_tool_on_cpu() -> None:
    pytest.importorskip("langchain_core")
    from tritonsmith.tools import make_profile_tool

    tool = make_profile_tool(PROBLEM, device="cpu")
    assert tool.name == "profile_kernel"
    text = tool.invoke({"candidate_source": TWO_KERNELS})
    assert "memory-bound" in text and "2 kernels where 1 would do" in text
    assert "failed to import" in tool.invoke({"candidate_source": "raise ValueError('x')\n"})
