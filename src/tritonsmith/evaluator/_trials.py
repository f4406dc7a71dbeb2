"""Correctness trials: fresh seeded inputs per trial, separate copies for reference and candidate.

With the guards on (the default), each trial also checks that the candidate launched Triton kernels,
left its inputs alone, returned plain tensors that alias neither its inputs nor its last outputs, and
that its outputs change when the reference's do. The reference's outputs are poisoned with NaN before
the candidate runs, so a kernel that leaves its output unwritten cannot pass on recycled memory. The
first trial records the aten ops both sides run (for the torch policy) and, under the ``kernelbench``
tolerance on float32 outputs, checks the candidate's error against a float64 reference.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tritonsmith.core.contract import JUDGED_FP32_NOTE
from tritonsmith.core.problem_meta import flatten_outputs
from tritonsmith.evaluator import _guards as guards
from tritonsmith.evaluator._compare import compare, describe_inputs

if TYPE_CHECKING:
    from tritonsmith.evaluator.sandbox._worker import Job

# Under ``kernelbench`` a float32 candidate may be this many times further from float64 than the
# reference is (summation order), but never worse than float32 can explain: fp16/bf16/tf32 compute is not.
_PRECISION_MULTIPLE = 16.0
_PRECISION_FLOOR = 1e-5


def run_trials(job: Job, ref_model: Any, cand_model: Any, make_inputs: Callable[[int], list[Any]]) -> dict[str, Any]:
    """Run ``trials`` comparisons; stop at the first failing trial and describe its first bad output."""
    from tritonsmith.evaluator._calls import float64_reference

    trials = int(job.spec["trials"])
    policy = job.spec["tolerance"]
    g = job.guards
    max_abs = max_rel = 0.0
    previous: tuple[list[Any], list[Any]] | None = None
    for t in range(trials):
        job.stage(f"trial {t + 1}/{trials}")
        seed = int(job.spec["seed"]) + 1000 * (t + 1)
        ref_out, cand_out, cand_inputs = _run_pair(job, ref_model, cand_model, make_inputs(seed), trial=t)
        ref64 = float64_reference(ref_model, make_inputs(seed)) if policy == "numerics" else None
        if g.enabled:
            with job.part("trial/behaviour"):
                _check_behaviour(job, t, ref_out, cand_out, cand_inputs, previous)
            previous = (_remember(ref_out), cand_out)
        with job.part("trial/compare"):
            mismatch, a, r = _check_outputs(t, cand_out, ref_out, ref64, policy)
        if mismatch and mismatch.get("kind") == "values" and tf32_allowed(job.device):
            with job.part("trial/strict_fp32"):
                mismatch, a, r = _against_strict_fp32(job, t, (ref_model, cand_model), lambda: make_inputs(seed),
                                                      (cand_out, ref_out, ref64), mismatch, (a, r))
        max_abs, max_rel = max(max_abs, a), max(max_rel, r)
        if mismatch:
            mismatch["pattern"] = {**(mismatch.get("pattern") or {}), "inputs": describe_inputs(make_inputs(seed))}
            if _float32_values(mismatch, ref_out) and (hint := _tf32_evidence(job)):
                mismatch["message"] += f"; {hint}"
            if mismatch.get("kind") == "values" and policy == "kernelbench":
                with job.part("trial/reference_float64"):
                    _ill_conditioned(job, ref_model, make_inputs(seed), mismatch)
            return {"trials": trials, "passed": t, "tolerance": policy, "max_abs_error": max_abs,
                    "max_rel_error": max_rel, "mismatch": mismatch}
        if t == 0 and g.enabled:
            with job.part("trial/first_checks"):  # the torch policy and the float64 precision check
                _check_first_trial(job, (ref_model, cand_model), lambda: make_inputs(seed), ref_out, cand_out)
    return {"trials": trials, "passed": trials, "tolerance": policy, "max_abs_error": max_abs, "max_rel_error": max_rel}


def _ill_conditioned(job: Job, ref_model: Any, inputs: list[Any], mismatch: dict[str, Any]) -> None:
    """Say so in the mismatch's pattern (``reference_vs_float64``: the largest difference) when the reference
    itself, run in full float32, is further from its float64 result than the tolerance allows on the failed
    output: then only a kernel that repeats its operation order can pass (24_EfficientNetB2: BatchNorm over two
    values per channel, 1.12 from float64)."""
    import torch

    from tritonsmith.evaluator._calls import call_reference, float64_reference
    from tritonsmith.evaluator._compare import kernelbench_tolerance

    i = int(mismatch["output_index"])
    try:
        with strict_fp32():
            ref = flatten_outputs(call_reference(job, ref_model, [_clone(x) for x in inputs]))[i]
        if not isinstance(ref, torch.Tensor) or ref.dtype != torch.float32:
            return
        exact = float64_reference(ref_model, inputs)[i].float()
    except Exception:  # noqa: BLE001 - a float64 copy too large, an op without a float64 kernel, float32 draws
        # mixed into a float64 model (an LSTM's random initial state): the verdict stands without the diagnosis
        return
    tol = kernelbench_tolerance(ref.dtype)
    if not torch.allclose(ref, exact, atol=tol, rtol=tol, equal_nan=True):
        gap = float((ref - exact).abs().nan_to_num(0.0).max())
        mismatch["pattern"]["reference_vs_float64"] = gap
        # in the message too: the records, reports and CLI line carry only the message
        mismatch["message"] += (f"; the reference is ill-conditioned here: in full float32 it is itself up to "
                                f"{gap:.3g} from its float64 result (--tolerance numerics judges against float64)")


def tf32_allowed(device: str) -> bool:
    """Whether PyTorch may run the reference's float32 convolutions or matmuls in TF32 here (cuDNN's default)."""
    import torch

    return device == "cuda" and bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32)


@contextmanager
def strict_fp32() -> Iterator[None]:
    """Within: cuDNN convolutions and cuBLAS matmuls in full float32 (no TF32); the flags are restored on exit."""
    import torch

    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _against_strict_fp32(job: Job, t: int, models: tuple[Any, Any], fresh_inputs: Callable[[], list[Any]],
                         outputs: tuple[list[Any], list[Any], list[Any] | None], mismatch: dict[str, Any],
                         errors: tuple[float, float]) -> tuple[dict[str, Any] | None, float, float]:
    """A second opinion when PyTorch ran float32 convolutions/matmuls in TF32 (cuDNN's default).

    First the candidate's output against the reference run in full float32: an exact fp32 Triton convolution
    differs from cuDNN's TF32 one by ~5e-4, beyond kernelbench's 1e-4. Then, if the candidate itself calls
    such library ops (the ``hybrid`` policy), both sides in full float32: deep networks amplify TF32's
    rounding of slightly different inputs on both sides. That passes only when the candidate's own
    output (TF32 allowed) is also about as close to the exact answer as the reference's is, so a candidate
    cannot be right only when the flags are off. Otherwise the first mismatch stands."""
    from tritonsmith.evaluator._calls import call_candidate, call_reference

    ref_model, cand_model = models
    cand_out, ref_out, ref64 = outputs
    policy = job.spec["tolerance"]
    with strict_fp32():
        strict = flatten_outputs(call_reference(job, ref_model, fresh_inputs()))
    again, a, r = _check_outputs(t, cand_out, strict, ref64, policy)
    if not again:
        # the timed rounds compare with the reference as run (TF32): as far from it as the trials found
        job.guards.tf32_spread = max(job.guards.tf32_spread, _spread(cand_out, ref_out))
        _note(job, JUDGED_FP32_NOTE)
        return None, a, r
    if not _library_ops(job) or not _as_close_as_the_reference(cand_out, ref_out, strict):
        return mismatch, *errors
    with strict_fp32():
        cand_strict = flatten_outputs(call_candidate(job, cand_model, fresh_inputs(), f"trial {t + 1} (fp32)"))
    again, a, r = _check_outputs(t, cand_strict, strict, ref64, policy)
    if again:
        return mismatch, *errors
    job.guards.tf32_spread = max(job.guards.tf32_spread, _spread(cand_out, ref_out))
    _note(job, "judged with both sides in full float32: the candidate's own torch convolutions/matmuls and "
               "the reference's ran in TF32 (cuDNN's default), whose rounding differs between them by more "
               "than the tolerance")
    return None, a, r


# how much further from the exact float32 answer than the reference's TF32 output a hybrid candidate's may be
_TF32_MULTIPLE = 4.0
# torch functions whose float32 results PyTorch may compute in TF32 (cuDNN convolutions, cuBLAS matmuls)
_TF32_OPS = ("conv", "mm", "matmul", "linear", "addmm", "baddbmm", "bmm", "einsum", "lstm", "gru", "rnn")


def _library_ops(job: Job) -> bool:
    """Whether the candidate ran an op that TF32 affects (recorded on the first trial; unknown counts as yes)."""
    if not job.guards.enabled:
        return True
    return any(any(k in str(op).lower() for k in _TF32_OPS) for op in job.guards.cand_ops)


def _as_close_as_the_reference(cand: list[Any], ref: list[Any], strict: list[Any]) -> bool:
    """Every float output of the candidate as run (TF32 allowed) is, normwise, within the loose bound (the
    timed rounds' check) of the exact float32 answer, or no further than ``_TF32_MULTIPLE`` times the
    reference's own TF32 output is from it (a deep network's TF32 error can exceed the loose bound)."""
    from tritonsmith.evaluator._compare import loose_tolerance, relative_error

    return all(relative_error(c, s) <= max(loose_tolerance(s.dtype), _TF32_MULTIPLE * relative_error(r, s))
               for (c, s), (r, _) in zip(_float_pairs(cand, strict), _float_pairs(ref, strict), strict=True))


def _spread(cand: list[Any], ref: list[Any]) -> float:
    """The largest normwise relative error between float outputs."""
    from tritonsmith.evaluator._compare import relative_error

    return max((relative_error(c, r) for c, r in _float_pairs(cand, ref)), default=0.0)


def _float_pairs(outs: list[Any], refs: list[Any]) -> list[tuple[Any, Any]]:
    """(output, reference) pairs of the floating-point reference outputs."""
    import torch

    return [(o, r) for o, r in zip(outs, refs, strict=True) if isinstance(r, torch.Tensor) and r.is_floating_point()]


def _note(job: Job, note: str) -> None:
    if note not in job.guards.notes:
        job.guards.notes.append(note)


def _run_pair(job: Job, ref_model: Any, cand_model: Any, ref_inputs: list[Any],
              *, trial: int) -> tuple[list[Any], list[Any], list[Any]]:
    """Reference, then (after poisoning its outputs' memory) the candidate on its own copy of the inputs."""
    from tritonsmith.evaluator._calls import call_candidate, call_reference

    g = job.guards
    cand_inputs = [_clone(x) for x in ref_inputs]
    first = trial == 0
    record = first and g.enabled
    with job.part("trial/reference"), guards.op_recorder(g.counter, g.ref_ops) if record else nullcontext():
        ref_raw = flatten_outputs(call_reference(job, ref_model, ref_inputs))
    if not g.enabled:
        ref_out = ref_raw
    else:
        with job.part("trial/poison"):
            ref_out = [_clone(o) for o in ref_raw]
            keep_away = [*ref_inputs, *cand_inputs, *ref_model.parameters(), *ref_model.buffers()]
            guards.poison(ref_raw, keep_away)
            del ref_raw
    with job.part("trial/save_inputs"):
        saved = guards.save_inputs(cand_inputs) if g.enabled else None
    before = g.counter.launches
    with job.part("trial/candidate"), guards.op_recorder(g.counter, g.cand_ops) if record else nullcontext():
        cand_out = flatten_outputs(call_candidate(job, cand_model, cand_inputs, f"trial {trial + 1}"))
    if g.enabled:
        if first:
            g.launches = g.counter.launches - before
        with job.part("trial/mutated_inputs"):
            bad = guards.mutated_inputs(saved or [], cand_inputs)
        if bad:
            raise guards.reject("input_mutated", job.stage_name, f"ModelNew.forward modified its input(s) {bad}; "
                                "inputs are read-only (write results to a new output tensor)")
    return ref_out, cand_out, cand_inputs


def _check_behaviour(job: Job, t: int, ref_out: list[Any], cand_out: list[Any], cand_inputs: list[Any],
                     previous: tuple[list[Any], list[Any]] | None) -> None:
    import torch

    g = job.guards
    stage = job.stage_name
    for i, c in enumerate(cand_out):
        if isinstance(c, torch.Tensor) and not guards.is_plain_tensor(c):
            raise guards.reject("lazy_output", stage, f"output {i} is a {type(c).__name__}, not a plain torch.Tensor "
                                "(outputs must be computed inside forward)")
    if t == 0 and g.launches == 0:
        raise guards.reject("no_kernel_launched", stage, "ModelNew.forward launched no Triton kernel; the result "
                            "must be computed by your @triton.jit kernels")
    ref_tensors = [o for o in ref_out if isinstance(o, torch.Tensor)]
    for i, c in enumerate(cand_out):
        if isinstance(c, torch.Tensor) and guards.shares_memory(c, cand_inputs):
            raise guards.reject("output_aliases_input", stage, f"output {i} shares memory with an input; write the "
                                "result to a new tensor")
        if previous and isinstance(c, torch.Tensor) and guards.shares_memory(c, previous[1]):
            raise guards.reject("output_reused", stage, f"output {i} is the same memory ModelNew returned on the "
                                "previous call: a caller holding the first result would see it overwritten")
    # The reference must really differ between the two inputs: an output that is mathematically constant
    # (GroupNorm over groups of one) differs only by rounding noise there, and an exact kernel may return
    # the same constant twice.
    if previous and ref_tensors and _all_equal(cand_out, previous[1]) and not _all_close(ref_out, previous[0]):
        raise guards.reject("outputs_ignore_inputs", stage, "ModelNew returned identical outputs for two different "
                            "inputs (the reference's outputs differ): results must be computed from the inputs")


def check_kernels_contribute(job: Job, ref_model: Any, cand_model: Any, make_inputs: Callable[[int], list[Any]]) -> None:
    """Decorative kernels: run the candidate once more with its Triton launches suppressed.

    The inputs are new, and memory the candidate allocates during this call holds NaN (so a recycled block
    cannot hold their answer: on ``torch.rand`` inputs, ReLU's answer is the inputs' own values, which a
    freed staging copy still holds). The kernels are decoration when, without them,
    the output still reproduces the reference's far more closely than the reference's own answer for other
    inputs would (normwise: within 1e-3 and within 1% of that input-to-input difference), on every output:
    PyTorch computed everything (``decorative_kernel``). A candidate that fails or raises without its
    kernels is what an honest one does. An output that does not depend on the inputs cannot tell: the
    check is skipped with a note.
    """
    from tritonsmith.evaluator._calls import call_reference

    import torch

    g = job.guards
    if not g.enabled:
        return
    job.stage("decorative-kernel check", key="checks_decorative")
    seed = int(job.spec["seed"]) + 7_777_777
    inputs = make_inputs(seed)
    g.counter.suppress = True
    try:
        with torch.no_grad(), uninitialized_memory_poisoned():
            bare = flatten_outputs(cand_model(*[_clone(x) for x in inputs]))
        if job.device == "cuda":
            torch.cuda.synchronize()
    except Exception:  # without its kernels the candidate cannot even finish: they matter
        return
    finally:
        g.counter.suppress = False
    ref = flatten_outputs(call_reference(job, ref_model, inputs))
    if len(bare) != len(ref) or not all(_close_enough(b, r) for b, r in zip(bare, ref, strict=True)):
        return  # the usual outcome, found without a second reference run
    other = flatten_outputs(call_reference(job, ref_model, make_inputs(seed + 1)))
    verdicts = [_reproduces(b, r, o) for b, r, o in zip(bare, ref, other, strict=False)]
    if len(bare) != len(ref) or False in verdicts:
        return
    if None in verdicts:
        g.notes.append("decorative-kernel check skipped: the reference's output does not depend on its inputs")
        return
    raise guards.reject("decorative_kernel", job.stage_name, (
        "the output is still correct with every Triton launch of ModelNew suppressed: the kernels contribute "
        "nothing and PyTorch computes the result; compute it with your Triton kernels"))


@contextmanager
def uninitialized_memory_poisoned() -> Iterator[None]:
    """Within: ``torch.empty`` and friends fill new memory with NaN (floats) or the type's maximum (integers).

    PyTorch does this under deterministic mode (``torch.utils.deterministic.fill_uninitialized_memory``);
    ``warn_only`` keeps ops without a deterministic implementation running (they warn, silenced here). The
    previous mode is restored on exit.
    """
    import torch

    was_on = torch.are_deterministic_algorithms_enabled()
    was_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.use_deterministic_algorithms(was_on, warn_only=was_warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill


def _close_enough(bare: Any, ref: Any) -> bool:
    """A cheap first look: could ``bare`` reproduce ``ref`` at all (normwise within 1e-3)?"""
    import torch

    from tritonsmith.evaluator._compare import relative_error

    if not isinstance(ref, torch.Tensor):
        return bare == ref
    if not isinstance(bare, torch.Tensor) or bare.shape != ref.shape or bare.dtype != ref.dtype:
        return False
    if not ref.is_floating_point():
        return bool(torch.equal(bare, ref))
    return relative_error(bare, ref) <= 1e-3


def _reproduces(bare: Any, ref: Any, other: Any) -> bool | None:
    """Whether ``bare`` reproduces ``ref``; None when ``ref`` does not differ from ``other`` (no signal)."""
    import torch

    from tritonsmith.evaluator._compare import relative_error

    if not isinstance(ref, torch.Tensor):
        return bare == ref if ref != other else None
    if not isinstance(bare, torch.Tensor) or bare.shape != ref.shape or bare.dtype != ref.dtype:
        return False
    if not ref.is_floating_point():
        return bool(torch.equal(bare, ref)) if not torch.equal(ref, other) else None
    spread = relative_error(other, ref)
    if not spread > 1e-3:  # NaN or tiny: the output does not depend on the inputs
        return None
    miss = relative_error(bare, ref)
    return miss <= 1e-3 and miss <= 0.01 * spread


_PRECISION_CHECK_MAX_ELEMENTS = 1 << 28  # 2 GiB per float64 copy


def _check_first_trial(job: Job, models: tuple[Any, Any], fresh_inputs: Callable[[], list[Any]], ref_out: list[Any],
                       cand_out: list[Any]) -> None:
    """After a passing first trial: kernel-side precision and the torch policy."""
    from tritonsmith.evaluator._calls import float64_reference

    import torch

    g = job.guards
    stage = job.stage_name
    finding = guards.policy_findings(g.policy, g.ref_ops, g.cand_ops)
    if finding:
        raise guards.reject(finding[0], stage, finding[1])
    fp32 = [i for i, r in enumerate(ref_out) if isinstance(r, torch.Tensor) and r.dtype == torch.float32]
    if job.spec["tolerance"] != "kernelbench" or not fp32:
        return
    lines = job.spec.get("tf32_lines") or []
    big = sum(x.numel() for x in ref_out if isinstance(x, torch.Tensor)) > _PRECISION_CHECK_MAX_ELEMENTS
    skipped = "outputs too large for a float64 copy" if big else None
    ref64 = None
    if not big:  # a float64 copy of model, inputs and outputs would not fit beside the trial's own tensors
        try:
            ref64 = float64_reference(models[0], fresh_inputs())
        except Exception as exc:  # an op without a float64 kernel: the check cannot run, say so
            skipped = f"{type(exc).__name__}: {str(exc)[:200]}"
    if ref64 is None:
        if lines:  # accuracy cannot be measured: a dot that asks for tf32 inputs is taken at its word
            raise guards.reject("precision_lowered", stage, f"{_tf32_asked(lines)}; the float64 check that could "
                                f"show the outputs keep float32 accuracy cannot run ({skipped})")
        g.notes.append(f"float64 precision check skipped: {skipped}")
        return
    errors = [(i, _rel_error(cand_out[i], ref64[i]), _rel_error(ref_out[i], ref64[i])) for i in fp32]
    over = [(i, c, r) for i, c, r in errors if c > max(_PRECISION_MULTIPLE * r, _PRECISION_FLOOR)]
    if over and tf32_allowed(job.device) and _library_ops(job):
        over = _over_in_strict_fp32(job, models[1], fresh_inputs, ref64, over)
    if over:
        i, cand_err, ref_err = over[0]
        raise guards.reject("precision_lowered", stage, (
            f"output {i}: normwise error vs float64 is {cand_err:.2e}, above what float32 explains "
            f"({max(_PRECISION_MULTIPLE * ref_err, _PRECISION_FLOOR):.2e}; the reference's own error is "
            f"{ref_err:.2e}): the kernel computes in lower precision (fp16/bf16/tf32) on a float32 problem; "
            f"{_tf32_cause(job)}"))
    if lines:
        g.notes.append(f"{_tf32_asked(lines)}, and the outputs keep float32 accuracy against float64 (operands "
                       "exact in tf32, such as pre-split hi/lo parts)")


def _over_in_strict_fp32(job: Job, cand_model: Any, fresh_inputs: Callable[[], list[Any]], ref64: list[Any],
                         over: list[tuple[int, float, float]]) -> list[tuple[int, float, float]]:
    """The outputs still above the float32 bound with the candidate run in full float32.

    A hybrid candidate's own torch convolutions/matmuls run in TF32 where PyTorch allows it (cuDNN's default),
    and cuDNN picks its algorithm per call: at some shapes the reference's call runs in full float32 and the
    candidate's (without its bias, or on another layout) in TF32, whose error is then the candidate's only
    excess. Run in full float32, only the candidate's Triton kernels can still lose accuracy: what stays
    over the bound is theirs. The flags are as PyTorch sets them for the timed runs, as for the reference."""
    from tritonsmith.evaluator._calls import call_candidate

    with strict_fp32():
        strict = flatten_outputs(call_candidate(job, cand_model, fresh_inputs(), "trial 1 (fp32)"))
    still = [(i, c, r) for i, c, r in over
             if _rel_error(strict[i], ref64[i]) > max(_PRECISION_MULTIPLE * r, _PRECISION_FLOOR)]
    if not still:
        worst = max(c for _, c, _ in over)
        _note(job, f"float64 precision check: the candidate's own torch convolutions/matmuls ran in TF32 "
                   f"(PyTorch's default; normwise error {worst:.2e}) where the reference's did not at this shape; "
                   f"run in full float32 its outputs keep float32 accuracy")
    return still


def _tf32_asked(lines: list[int]) -> str:
    return f"tl.dot asks for one-pass tf32 inputs (line {lines[0]}) on a float32 problem"


def _float32_values(mismatch: dict[str, Any], ref_out: list[Any]) -> bool:
    """Whether the mismatch is in the values of a float32 output (where tf32 dots can be the cause)."""
    import torch

    i = mismatch.get("output_index")
    out = ref_out[i] if mismatch.get("kind") == "values" and isinstance(i, int) and i < len(ref_out) else None
    return isinstance(out, torch.Tensor) and out.dtype == torch.float32


_TF32_FIX = "input_precision='tf32x3' (three tf32 passes) or 'ieee' keep float32 accuracy"


def _tf32_evidence(job: Job) -> str | None:
    """What says the kernel's dots ran one-pass tf32: a ``tl.dot`` asking for it, or (on the CPU, where the
    interpreter computes what the tensor cores do) the dots that ran so; None without either."""
    lines = job.spec.get("tf32_lines") or []
    if lines:
        return f"{_tf32_asked(lines)}: {_TF32_FIX}"
    if job.device != "cpu":
        return None
    from tritonsmith.evaluator._tensorcores import one_pass_tf32_dots

    ran = one_pass_tf32_dots()
    return (f"{ran} tl.dot calls ran one-pass tf32 on float32 operands (Triton's default without input_precision): "
            f"{_TF32_FIX}") if ran else None


def _tf32_cause(job: Job) -> str:
    """The likeliest cause of a float32 kernel's lost accuracy, for the model that has to fix it."""
    return _tf32_evidence(job) or ("a tl.dot on float32 operands runs one-pass tf32 unless it says otherwise "
                                   f"(Triton's default without input_precision): {_TF32_FIX}")


def _rel_error(x: Any, exact: Any) -> float:
    exact = exact.double()
    norm = float(exact.norm()) or 1.0
    return float((x.double() - exact).norm()) / norm


def _all_equal(a: list[Any], b: list[Any]) -> bool:
    import torch

    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


# the reference outputs of a trial are kept whole for the next trial's check up to this size in all; past it,
# each large one as a sample (a conv output of 2^31 floats is 8.6 GB; the trials hold several tensors that size)
_REMEMBER_WHOLE_BYTES = 1 << 30
_SAMPLE_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class _Sampled:
    """A large tensor remembered by ``values``: every ``step``-th of its elements, in memory order."""

    shape: tuple[int, ...]
    dtype: Any
    step: int
    values: Any


def _sample(x: Any, step: int) -> _Sampled:
    return _Sampled(tuple(x.shape), x.dtype, step, x.reshape(-1)[::step].clone())


def _remember(outputs: list[Any]) -> list[Any]:
    """``outputs`` as the next trial's behaviour check needs them (``_all_close``): whole, or, when their
    tensors exceed ``_REMEMBER_WHOLE_BYTES`` in all, each tensor of more than ``_SAMPLE_ELEMENTS`` elements
    as an evenly spaced sample of about that many (the check then compares the same elements of the next
    trial's output). The candidate's outputs are always kept whole: the reuse check needs them alive."""
    import torch

    tensors = [x for x in outputs if isinstance(x, torch.Tensor)]
    if sum(x.numel() * x.element_size() for x in tensors) <= _REMEMBER_WHOLE_BYTES:
        return outputs
    return [_sample(x, -(-x.numel() // _SAMPLE_ELEMENTS))
            if isinstance(x, torch.Tensor) and x.numel() > _SAMPLE_ELEMENTS else x for x in outputs]


def _all_close(a: list[Any], b: list[Any]) -> bool:
    """Equal within the ``kernelbench`` tolerance of each tensor's dtype (atol = rtol); where ``b`` holds a
    :class:`_Sampled` tensor, on the same sample of ``a``'s."""
    import torch

    from tritonsmith.evaluator._compare import kernelbench_tolerance

    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(y, _Sampled):
            if not isinstance(x, torch.Tensor) or (tuple(x.shape), x.dtype) != (y.shape, y.dtype):
                return False
            x, y = _sample(x, y.step).values, y.values
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point():
                tol = kernelbench_tolerance(x.dtype)
                if not torch.allclose(x, y, atol=tol, rtol=tol, equal_nan=True):
                    return False
            elif not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def _check_outputs(trial: int, cand: list[Any], ref: list[Any], ref64: list[Any] | None,
                   policy: str) -> tuple[dict[str, Any] | None, float, float]:
    import torch

    if len(cand) != len(ref):
        return _mismatch(trial, 0, f"ModelNew returned {len(cand)} outputs, Model returns {len(ref)}",
                         kind="count"), 0.0, 0.0
    max_abs = max_rel = 0.0
    for i, (c, r) in enumerate(zip(cand, ref, strict=True)):
        if not isinstance(r, torch.Tensor):
            if c != r:
                return _mismatch(trial, i, f"output {i}: expected {r!r}, got {c!r}", kind="type"), max_abs, max_rel
            continue
        problem = _structural_problem(i, c, r)
        if problem:
            return _mismatch(trial, i, problem[1], kind=problem[0]), max_abs, max_rel
        verdict = compare(c, r, policy=policy, ref64=ref64[i] if ref64 else None)
        max_abs, max_rel = max(max_abs, verdict.max_abs_error), max(max_rel, verdict.max_rel_error)
        if not verdict.ok:
            d = verdict.details
            message = d.pop("message", None) or (
                f"output {i}: {d['mismatched']} of {d['total']} elements outside tolerance "
                f"(max abs error {verdict.max_abs_error:.3g}, max rel error {verdict.max_rel_error:.3g})")
            keep = {k: d[k] for k in ("mismatched", "total", "nan_count", "inf_count", "first_bad_index",
                                       "candidate_value", "reference_value", "pattern") if k in d}
            return _mismatch(trial, i, message, kind="values", max_abs_error=verdict.max_abs_error,
                             max_rel_error=verdict.max_rel_error, **keep), max_abs, max_rel
    return None, max_abs, max_rel


def _structural_problem(i: int, c: Any, r: Any) -> tuple[str, str] | None:
    """(kind, message) when output ``i`` is not even comparable: not a tensor, wrong shape, dtype or device."""
    import torch

    if not isinstance(c, torch.Tensor):
        return "type", f"output {i}: expected a tensor, got {type(c).__name__}"
    if tuple(c.shape) != tuple(r.shape):
        return "shape", f"output {i}: shape {tuple(c.shape)} but the reference has {tuple(r.shape)}"
    if c.dtype != r.dtype:
        return "dtype", f"output {i}: dtype {c.dtype} but the reference has {r.dtype}"
    if c.device != r.device:
        return "device", f"output {i}: on {c.device} but the reference is on {r.device}"
    return None


def _mismatch(trial: int, index: int, message: str, **fields: Any) -> dict[str, Any]:
    if "first_bad_index" in fields and fields["first_bad_index"] is not None:
        fields["first_bad_index"] = list(fields["first_bad_index"])
    return {"trial": trial + 1, "output_index": index, "message": f"trial {trial + 1}: {message}", **fields}


def _clone(x: Any) -> Any:
    import torch

    return x.clone() if isinstance(x, torch.Tensor) else x

