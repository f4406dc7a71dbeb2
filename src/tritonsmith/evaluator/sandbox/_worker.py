"""The evaluation worker: ``python -m tritonsmith.evaluator.sandbox._worker SPEC.json``.

Runs in its own process (see ``_sandbox``). Loads the reference and the candidate, checks the
candidate on fresh random inputs for several trials, and on CUDA times candidate, eager reference and
``torch.compile`` reference. Writes one JSON result; anything it cannot write is the parent's to explain.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tritonsmith.core.modload import import_file
from tritonsmith.core.problem_meta import check_inputs, exec_reference, reference_inputs
from tritonsmith.core.problem import ProblemError
from tritonsmith.evaluator._errors import CandidateFailure, describe
from tritonsmith.evaluator._calls import call_status
from tritonsmith.evaluator._guards import Guards


class Job:
    """One evaluation: the spec, the loaded modules and a stage marker the parent can read after a kill."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.device: str = spec["device"]
        self.candidate_path = Path(spec["candidate_path"])
        self._stage_path = Path(spec["stage_path"])
        self.guards = Guards(spec)
        self.stage_name = ""
        self._stage_key = ""
        self._stage_start = time.perf_counter()
        self.stage_seconds: dict[str, float] = {}

    def stage(self, name: str, key: str | None = None) -> None:
        """Enter stage ``name`` (what a timeout reports); its time adds up under ``key`` (default: the
        first word of the name, so the trials share ``trial``)."""
        now = time.perf_counter()
        if self.stage_name:
            self.stage_seconds[self._stage_key] = self.stage_seconds.get(self._stage_key, 0.0) + now - self._stage_start
        self._stage_start = now
        self.stage_name = name
        self._stage_key = key or name.split(" ")[0].split(":")[0]
        self._stage_path.write_text(name)

    @contextmanager
    def part(self, key: str) -> Iterator[None]:
        """Time a part of the current stage under ``key`` (``trial/float64``): reported beside the stage, not summed."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stage_seconds[key] = self.stage_seconds.get(key, 0.0) + time.perf_counter() - t0

    def write(self, result: dict[str, Any], key: bytes) -> None:
        path = Path(self.spec["result_path"])
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**result, "signature": sign(result, key)}))
        tmp.replace(path)


def sign(result: dict[str, Any], key: bytes) -> str:
    """HMAC of the result under the key the parent sent on stdin: a candidate cannot forge a verdict file."""
    return hmac.new(key, json.dumps(result, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def _read_key() -> bytes:
    """The parent writes one line (the result key) and closes stdin; read it before any candidate code runs."""
    key = sys.stdin.buffer.readline().strip()
    sys.stdin.close()
    sys.stdin = open(os.devnull)  # noqa: SIM115  (the candidate must find nothing there)
    return key


def main(argv: list[str]) -> int:
    key = _read_key()
    # ``-m`` put the job directory (reference and spec files) on sys.path; the candidate must not import them.
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    spec = json.loads(Path(argv[1]).read_text())
    job = Job(spec)
    try:
        result = run(job)
    except ProblemError as exc:
        result = {"problem_error": str(exc)}
    except CandidateFailure as exc:
        result = {"status": exc.status, "stage": exc.stage, "message": exc.message, "error": exc.detail,
                  "rule": exc.rule}
    except Exception as exc:
        if not _out_of_memory(exc):
            raise
        result = _memory_result(job, exc)
    job.stage("done")
    result.update(_environment(job.device))
    result["stage_seconds"] = {k: round(v, 3) for k, v in job.stage_seconds.items()}
    if "problem_error" not in result and job.guards.enabled:
        result["checks"] = job.guards.report()
    job.write(result, key)
    sys.stdout.flush()
    return 0


def _out_of_memory(exc: BaseException) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(exc, torch.OutOfMemoryError)


def _memory_result(job: Job, exc: BaseException) -> dict[str, Any]:
    """The device ran out of memory outside the candidate's own calls (those report their errors as the
    candidate's): the evaluator's copies of outputs and inputs did not fit beside the candidate's tensors."""
    import traceback

    tail = "".join(traceback.format_exception(exc)[-3:])[-1500:]
    return {"status": "runtime_error", "stage": job.stage_name, "error": tail,
            "message": (f"out of {job.device} memory in the evaluator's own checks during {job.stage_name} "
                        "(its copies of the reference's and the candidate's outputs did not fit beside the "
                        "candidate's tensors); the candidate was not judged: evaluate it on smaller inputs "
                        "(--scale) or on a device with more memory")}


def _environment(device: str) -> dict[str, Any]:
    """Device name and versions as this worker saw them (the caller then needs no CUDA context of its own)."""
    import platform

    torch = sys.modules.get("torch")
    triton = sys.modules.get("triton")
    if torch is None:
        return {}
    found: dict[str, Any] = {"versions": {"python": platform.python_version(), "torch": torch.__version__,
                                          "triton": getattr(triton, "__version__", "missing")}}
    if device == "cuda" and torch.cuda.is_initialized():
        found["device_name"] = torch.cuda.get_device_name()
    return found


def exit_now(code: int) -> None:
    """Flush and leave without interpreter teardown (torch/inductor finalizers cost up to a second).

    The result file is already written (atomically) and nothing the worker leaves behind is needed.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def run(job: Job) -> dict[str, Any]:
    import torch

    from tritonsmith.evaluator import _bench, _compare  # noqa: F401  (loaded before the guards arm: watched)
    from tritonsmith.evaluator._trials import check_kernels_contribute, run_trials

    spec = job.spec
    if job.device == "cuda":  # the context starts here with or without the checks (stage times compare)
        job.stage("cuda_init")
        torch.cuda.init()
        torch.cuda.current_stream()
    else:  # the interpreter's tl.dot computes what the GPU's tensor cores would (tf32 inputs, tf32x3)
        from tritonsmith.evaluator._tensorcores import emulate_tensor_cores

        emulate_tensor_cores()
    job.stage("load_reference")
    ref_module = exec_reference(Path(spec["problem_path"]).read_text(), spec["problem_name"])
    job.guards.arm()
    job.stage("load_candidate")
    candidate_cls = load_candidate(job)
    job.guards.checkpoint("load_candidate")
    job.stage("init")
    ref_model, cand_model, init = build_models(job, ref_module, candidate_cls)
    job.guards.checkpoint("init")
    make_inputs = input_factory(job, ref_module)
    correctness = run_trials(job, ref_model, cand_model, make_inputs)
    result: dict[str, Any] = {"correctness": correctness}
    if correctness["passed"] < correctness["trials"]:
        mismatch = correctness.get("mismatch") or {}
        result.update(status="wrong_output", stage="correctness", message=mismatch.get("message", "wrong output"))
        return result
    check_kernels_contribute(job, ref_model, cand_model, make_inputs)
    job.guards.checkpoint("correctness")
    result.update(status="correct", message=f"correct on {correctness['trials']} trials")
    if job.device == "cuda" and spec.get("benchmark", True):
        from tritonsmith.evaluator._bench import run_benchmark

        job.guards.before_benchmark()
        job.stage("benchmark")
        result["benchmark"] = run_benchmark(job, ref_model, cand_model, make_inputs)
    return result


def load_candidate(job: Job) -> type:
    try:
        module = import_file(job.candidate_path, "_tritonsmith_candidate")
    except BaseException as exc:  # the candidate's module body is untrusted code: any failure is its own
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise CandidateFailure("crashed", "load_candidate", f"candidate raised {type(exc).__name__} at import") from exc
        raise CandidateFailure("compile_error", "load_candidate", "the candidate failed to import",
                               describe(exc, job.candidate_path)) from exc
    cls = getattr(module, "ModelNew", None)
    if not isinstance(cls, type):
        raise CandidateFailure("compile_error", "load_candidate",
                               "the candidate defines no class ModelNew (it must subclass nn.Module and take the same "
                               "constructor arguments as Model)")
    return cls


def build_models(job: Job, ref_module: Any, candidate_cls: type) -> tuple[Any, Any, list[Any]]:
    """Model and ModelNew built from the same seed, so parameters with the same names match."""
    import torch

    seed = int(job.spec["seed"])
    name = job.spec["problem_name"]
    with torch.device(job.device):
        init = check_inputs(ref_module.get_init_inputs(), "get_init_inputs", name)
        torch.manual_seed(seed)
        try:
            ref_model = ref_module.Model(*init)
        except Exception as exc:
            raise ProblemError(f"{name}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from exc
        torch.manual_seed(seed)
        try:
            cand_model = candidate_cls(*init)
        except Exception as exc:
            raise CandidateFailure(call_status(exc), "init", "ModelNew(*get_init_inputs()) raised",
                                   describe(exc, job.candidate_path)) from exc
    ref_model = ref_model.to(job.device)
    cand_model = cand_model.to(job.device) if hasattr(cand_model, "to") else cand_model
    _load_weights(job, ref_model, cand_model)
    dtype = job.spec.get("dtype")
    if dtype:
        ref_model = ref_model.to(getattr(torch, dtype))
        cand_model = cand_model.to(getattr(torch, dtype))
    return ref_model, cand_model, init


def _load_weights(job: Job, ref_model: Any, cand_model: Any) -> None:
    path = job.spec.get("weights_path")
    if not path:
        return
    import torch

    state = torch.load(path, map_location=job.device)
    ref_model.load_state_dict(state)
    own = cand_model.state_dict() if hasattr(cand_model, "state_dict") else {}
    shared = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    if shared:
        cand_model.load_state_dict(shared, strict=False)


def input_factory(job: Job, ref_module: Any) -> Callable[[int], list[Any]]:
    """Fresh inputs for a seed, created directly on the device (no host-side generation and copy)."""
    import torch

    name = job.spec["problem_name"]
    dtype = getattr(torch, job.spec["dtype"]) if job.spec.get("dtype") else None

    def make(seed: int) -> list[Any]:
        torch.manual_seed(seed)
        values = reference_inputs(ref_module, name, job.device)
        if dtype is not None:
            values = [v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]
        return values

    return make


if __name__ == "__main__":
    exit_now(main(sys.argv))
