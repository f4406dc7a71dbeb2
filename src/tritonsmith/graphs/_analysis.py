"""The analyze step's text (op signature, FLOPs, bytes, what bounds it) and the explanations of failures."""

from __future__ import annotations

from typing import Any

from tritonsmith.core.contract import rule_fix
from tritonsmith.core.problem import Problem, ProblemError, ProblemInfo
from tritonsmith.graphs.state import GENERATOR_ERROR, MODEL_ERROR, NO_CODE, AttemptRecord

# H100-class figures for a roofline estimate (per-second rates); a ridge point = FLOP/s / (byte/s).
_HBM_BYTES_S = 3.35e12
_FP32_FLOPS_S = 67e12
_TENSOR_FLOPS_S = 495e12  # tf32 dense: what tl.dot gives an fp32 matmul
_TENSOR_OPS = ("mm", "addmm", "bmm", "baddbmm", "convolution", "matmul", "linear", "_scaled_dot_product")


def analyze_problem(problem: Problem) -> tuple[str, dict[str, Any]]:
    """A short analysis for the generator, and the same facts as a JSON-able dict."""
    try:
        info = problem.inspect()
    except ProblemError as exc:  # the meta trace failed; the evaluator will judge the real thing
        return f"(the problem could not be traced on the meta device: {exc})", {"traced": False}
    return _describe(info), _facts(info)


def _facts(info: ProblemInfo) -> dict[str, Any]:
    moved = info.input_bytes + info.output_bytes + info.parameter_bytes
    flops = info.flops or 0
    tensor = any(op.startswith(_TENSOR_OPS) for op in info.ops)
    intensity = flops / moved if moved else 0.0
    ridge = (_TENSOR_FLOPS_S if tensor else _FP32_FLOPS_S) / _HBM_BYTES_S
    bound = "compute-bound" if flops and intensity >= ridge else "memory-bound"
    floor_us = max(moved / _HBM_BYTES_S, flops / (_TENSOR_FLOPS_S if tensor else _FP32_FLOPS_S)) * 1e6
    return {"traced": True, "inputs": [str(s) for s in info.inputs], "outputs": [str(s) for s in info.outputs],
            "parameters": [f"{n}: {s}" for n, s in info.parameters], "ops": list(dict.fromkeys(info.ops)),
            "flops": info.flops, "bytes": moved, "intensity": intensity, "ridge": ridge, "bound": bound,
            "uses_tensor_cores": tensor, "roofline_floor_us": floor_us}


def _describe(info: ProblemInfo) -> str:
    f = _facts(info)
    ops = ", ".join(f["ops"][:12]) + (" ..." if len(f["ops"]) > 12 else "")
    flops = "not counted (no matmul/conv)" if not f["flops"] else f"{f['flops']:.3g}"
    lines = [
        f"inputs: {', '.join(f['inputs']) or 'none'}; outputs: {', '.join(f['outputs']) or 'unknown'}",
        f"parameters: {', '.join(f['parameters']) or 'none'}",
        f"aten ops in forward: {ops or 'none recorded'}",
        f"FLOPs: {flops}; minimum bytes moved: {f['bytes'] / 1e6:.3g} MB "
        f"(arithmetic intensity {f['intensity']:.3g} FLOP/B, ridge ~{f['ridge']:.0f} FLOP/B)",
        f"bound: {f['bound']} -> " + ("maximise tl.dot throughput (tiling, pipelining)." if f["bound"] == "compute-bound"
                                     else "read each input once, fuse everything, avoid intermediate tensors."),
        f"roofline floor on an H100-class GPU: ~{f['roofline_floor_us']:.3g} us (an estimate, not a measurement)",
    ]
    return "\n".join(lines)


_HINTS = {
    "compile_error": ("The file did not load or the kernel did not compile. Fix the line named above; common "
                      "causes: a tl function that does not exist, a block size that is not a tl.constexpr power "
                      "of two, a missing import, Python control flow on tensor values inside the kernel."),
    "wrong_output": ("The kernel runs but computes wrong values. Check the masks and their `other=` values "
                     "(-inf for a max, 0 for a sum), offsets and strides, the grid covering every element, and "
                     "fp32 accumulation."),
    "runtime_error": ("The candidate raised while running. Check the launch grid, argument order and count, "
                      "tensor contiguity and that every tensor is on the input's device."),
    "timeout": ("The candidate did not finish in time. Check loop bounds and the grid size; avoid huge grids of "
                "tiny programs."),
    "crashed": ("The worker died: usually an out-of-bounds load or store (a missing mask) or an illegal "
                "address from wrong strides."),
    "rejected": ("The evaluator rejected the candidate: see the rule above and what the system prompt says "
                 "the policy in force allows."),
    MODEL_ERROR: ("The model server failed on the last request (see the message above); nothing was "
                  "evaluated. Submit the complete candidate."),
    NO_CODE: ("No code was submitted. Submit the complete file through submit_kernel or one ```python block."),
    GENERATOR_ERROR: ("The generator itself failed (its traceback is in the attempt's record); the next iteration "
                      "tries again."),
}


def explain_failure(attempt: AttemptRecord) -> str:
    """What the generator should look at, given how the attempt failed."""
    if attempt["status"] == "wrong_output" and _diagnosed(attempt):
        return "Fix what the diagnosis above names first; the rest of the kernel may be right."
    if attempt["status"] == "rejected":
        fix = rule_fix((attempt.get("result") or {}).get("rule"))
        if fix:
            return f"The evaluator rejected the candidate: {fix}"
    return _HINTS.get(attempt["status"], "The attempt failed; read the evaluator's message above.")


def _diagnosed(attempt: AttemptRecord) -> bool:
    """Whether the evaluator's feedback already names what is wrong with the output (its diagnosis lines)."""
    return "\ndiagnosis: " in attempt.get("feedback", "")
