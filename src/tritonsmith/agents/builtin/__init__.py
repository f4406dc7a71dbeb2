"""The built-in generator: writes Triton kernels for a reference without any LLM.

It traces the reference with ``torch.export``, lowers it to a small graph (pointwise ops, reductions,
matmuls, pooling windows, scans, torch calls), partitions it into fusion groups and emits one Triton
kernel per group:

- elementwise chains with broadcasting -> one pointwise kernel; constant fills (``torch.full``, ``zeros_like``,
  ``ones`` ...) read nothing: their value is inlined where they are used;
- ``torch.cat`` along one dim -> a pointwise kernel of its own (with the chain after it): each element
  picks its source by its index along that dim, a masked load through the source's strides (a computed
  source is stored by its own group first) or a fill's value;
- reductions and normalizations (sum/mean/max/min/argmax/argmin, softmax, log-softmax, layer/RMS/
  batch/instance/group norm, losses) -> one row kernel per set of rows, with the ops around them; mean
  and variance (Welford) and max and sum of exp (online softmax) share one read; few long rows are
  split over many programs (partials in a small fp32 workspace, then a combine-and-write kernel);
- matmul / bmm / linear -> a tiled ``tl.dot`` kernel with the following elementwise chain as epilogue;
  fp32 operands use Triton's in-loop ``tf32x3`` (three tensor-core passes, fp32 accuracy); a variant
  pre-splits them into tf32 hi/lo parts (3xTF32: one pipelined dot over 3K), slower on the H200; another
  (``mm-aligned``, first for a large GEMM whose rows do not start on 16-element boundaries) copies the
  operands into zero-padded scratch so the tiles move in 16-byte pieces; never plain tf32;
- max / average pooling, 1-D to 3-D (``nn.MaxPool1d/2d/3d``, ``nn.AvgPool1d/2d/3d``, ``F.max_pool*``,
  ``F.avg_pool*``: kernel size, stride, padding, dilation, ceil_mode, count_include_pad,
  divisor_override) -> one "window" kernel: each program writes a block of contiguous outputs, the
  window unrolled at compile time, padding masked (max: -inf, avg: 0 and torch's divisor), fp32
  accumulation, with the following elementwise chain as epilogue; ``return_indices=True`` is refused;
- ``torch.cumsum`` / ``torch.cumprod`` -> one "scan" kernel: BLOCK_K rows per program (rows addressed
  through strides, so any dim), each walked in blocks scanned with ``tl.cumsum`` / ``tl.cumprod`` in fp32
  with the running total (product) carried between blocks; the elementwise ops before the scan (e.g. a
  mask) and after it run in the same loop;
- depthwise convolutions (``groups == in_channels``, ``out_channels = mult * in_channels``, not
  transposed, 1-D to 3-D, any stride / padding / dilation, with or without bias) -> a "window" kernel
  too (``_dwconv.py``): BLOCK contiguous outputs per program, the filter unrolled at compile time, zero
  padding masked, the filter taps loaded per output channel, one fp32 FMA per tap (exact fp32, no
  tensor cores: the op is memory-bound), the bias and the following elementwise chain as epilogue;
- other convolutions (dense, grouped, dilated, strided, transposed; 1-D to 3-D) -> an implicit-GEMM "conv"
  kernel (``_convgemm.py``): M = images x output positions, N = output channels per group, K = input
  channels per group x filter taps, the input gathered through its strides (zero padding masked; a
  transposed convolution in gather form), in-loop ``tf32x3`` dots (``ieee`` a variant), the bias and the
  chain after it as epilogue. It is the default where the problem is only convolutions (a torch call
  would be a torch wrapper); where a chain follows, cuDNN with the chain fused into a Triton kernel stays
  first (the hybrid policy: the candidate's note names the torch ops that remain) and ``conv-triton`` is a
  later variant;
- LSTM / GRU / RNN layers stay torch calls (``_rnn.py``: traced as one custom op each, one call for all the
  outputs used), and so do indexing by a tensor and random tensors drawn in forward (``torch.randn``
  initial states);
- whole models: parameters and buffers of any module tree are read through Python a reader can follow
  (``self.features[3].weight``, ``self.heads['aux-1'].weight``); the reference's submodule classes,
  helpers and imports are copied (submodule ``forward`` methods dropped: ModelNew's forward computes);
  a kernel repeated across blocks at the same shapes is written once (later launchers are aliases).

A bug of ours in one variant returns a candidate with ``error`` (its traceback) naming the variant; the
loop records it as an ``error`` attempt and the next call tries another variant.

Kernel kinds (in notes, ``PlanSummary.kernels`` and kernel names ``_<kind>_<i>_kernel``): pointwise,
row, matmul, window, scan, conv.

Refinement reads the evaluator's verdicts in ``request.history`` and tries the next variant (block
sizes, warps, stages, one-pass vs multi-pass rows, split vs unsplit rows, split-K, 3xTF32 vs tf32x3 vs
ieee dot precision, outputs per window program, scan block sizes). Variants the kernel memory measured
fastest for exactly this problem on this GPU class (``request.tuned_variants``: a per-shape tuning cache)
are tried first. When nothing can be
written it says so (``source=None``, ``exhausted=True``) instead of emitting a torch wrapper.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tritonsmith.agents.base import Candidate, GenerationRequest
from tritonsmith.agents.builtin._ir import UnsupportedError

if TYPE_CHECKING:
    from tritonsmith.agents.builtin._trace import Exported
from tritonsmith.core.problem import Problem

__all__ = ["BuiltinGenerator", "PlanSummary", "menu_for", "summarize", "tuned_first"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class PlanSummary:
    """What the generator would write for a problem: kernel kinds, torch ops kept, or why nothing."""

    problem: str
    emittable: bool
    kernels: tuple[str, ...] = ()
    torch_ops: tuple[str, ...] = ()
    reason: str = ""


class _ProblemState:
    def __init__(self, problem: Problem) -> None:
        from tritonsmith.agents.builtin._trace import export_problem

        self.exported: Exported | None = None
        self.error: str | None = None  # why this problem cannot be written (a limitation: no_code)
        self.bug: str | None = None  # the traceback of a failure of ours while planning it (error)
        self.menu: list[Any] = []
        self.torch_ops: list[str] = []
        self.other: Exported | str = "not exported"  # the reference at another leading size (_plan)
        try:
            self.exported = export_problem(problem)
        except Exception as exc:  # export of arbitrary user code fails in many ways: the reference's limit
            self.error = f"torch.export could not trace the reference: {type(exc).__name__}: {exc}"
            return
        from tritonsmith.agents.builtin._shapes import other_lead
        from tritonsmith.agents.builtin._trace import leading_size

        try:
            ref = leading_size(list(self.exported[1]))
            self.other = "no tensor input has a leading dimension" if ref is None else \
                _export_other(problem, other_lead(ref))
            self.menu, self.torch_ops = menu_for(problem, self.exported, self.other)
        except UnsupportedError as exc:
            self.error = str(exc)
            return
        except Exception:  # a bug in lowering, partitioning or the menu: an error attempt, never raised
            log.exception("builtin: planning %s failed", problem.name)
            self.bug = traceback.format_exc(limit=20)
            return


def menu_for(problem: Problem, exported: Exported | None, other: Exported | str | None = None,
             options: dict[str, Any] | None = None) -> tuple[list[Any], list[str]]:
    """The variants to try for ``problem``, in order, and the torch ops its plan keeps (``other`` and
    ``options`` as for ``_plan``).

    Where an algebraic rewrite fires (``_rewrite.py``) the menu is the rewritten plan's, then ``no-rewrites``
    last: the first variant of the plan as traced, so the evaluator measures (and proves) the rewrite
    against the plain lowering instead of assuming it is right and faster."""
    from tritonsmith.agents.builtin._variants import Variant, variant_menu

    traced, plan = _plan(problem, dict(options or {}), exported, other)
    menu = variant_menu(plan)
    if traced.rewrites:
        try:
            first = variant_menu(_plan(problem, {**(options or {}), "no_rewrites": True}, exported, other)[1])[0]
        except UnsupportedError as exc:  # the plain lowering cannot be written: the rewrite is the only way
            log.info("builtin: %s without rewrites is not writable: %s", problem.name, exc)
        else:
            menu.append(Variant("no-rewrites", f"the graph as traced, without the rewrites {', '.join(traced.rewrites)}"
                                f" ({first.key}: {first.why})", {**first.options, "no_rewrites": True},
                                first.overrides))
    return menu, list(plan.torch_ops)


def tuned_first(menu: list[Any], tuned: Sequence[str]) -> list[Any]:
    """``menu`` with the variants the kernel memory measured fastest for this exact problem (``tuned``, fastest
    first; a ``+ieee`` form counts as its base variant) moved to the front: a shape tuned once is not searched
    again. Variants the menu no longer has are ignored (the generator changed since)."""
    rank: dict[str, int] = {}
    for i, key in enumerate(t.removesuffix("+ieee") for t in tuned):
        rank.setdefault(key, i)
    return sorted(menu, key=lambda v: rank.get(v.key, len(tuned)))


def variant_label(variant: Any, traced: Any) -> str:
    """How the emitted module's header names the variant (and the rewrites that shaped its graph)."""
    label = f"{variant.key} ({variant.why})"
    return label + (f"; rewrites: {', '.join(traced.rewrites)}" if traced.rewrites else "")


def _plan(problem: Problem, options: dict[str, Any], exported: Exported | None,
          other: Exported | str | None = None) -> tuple[Any, Any]:
    """Trace, lower and partition ``problem`` under the variant's ``options``. Unless they ask for
    ``static_shapes``, the plan's kernels take the leading size at run time where ``_shapes`` finds that
    sound (``plan.lead``; else ``plan.static_reason`` says why not). ``other``: the reference exported at
    the other leading size (or why it could not be), when the caller keeps it."""
    from tritonsmith.agents.builtin._partition import partition
    from tritonsmith.agents.builtin._trace import trace_problem

    traced = trace_problem(problem, options, exported)
    try:
        plan = partition(traced.graph)
    except UnsupportedError:
        # only torch convolutions (and a bias): unless the variant chose (conv-cudnn), write them in Triton
        if "conv" in options or not any(n.kind == "extern" and n.attrs.get("op") in ("conv", "conv_transpose")
                                         for n in traced.graph.nodes):
            raise
        options = {**options, "conv": "triton"}
        traced = trace_problem(problem, options, exported)
        plan = partition(traced.graph)
    if not options.get("static_shapes"):
        _shape_generic(problem, options, traced, plan, other)
    if options.get("net_cl"):
        from tritonsmith.agents.builtin._convcl import apply_network, plan_network

        net = plan_network(plan)
        if net is None:
            raise UnsupportedError("net-cl: no convolution of this model can run channels-last")
        apply_network(plan, net)
    return traced, plan


def _shape_generic(problem: Problem, options: dict[str, Any], traced: Any, plan: Any,
                   other: Exported | str | None) -> None:
    """Set ``plan.lead`` where the kernels can take the leading size at run time, else ``plan.static_reason``."""
    from tritonsmith.agents.builtin._shapes import NotGeneric, generic_lead, other_lead
    from tritonsmith.agents.builtin._trace import trace_problem

    ref = next((n.shape[0] for n in traced.graph.inputs if n.shape), None)
    if ref is None:
        plan.static_reason = "no tensor input has a leading dimension"
        return
    size = other_lead(ref)
    try:
        if other is None:
            other = _export_other(problem, size)
        if isinstance(other, str):
            raise NotGeneric(other)
        again = {**options, "split_k_auto": traced.split_k_auto}  # the same split-K at the other size
        plan.lead = generic_lead(traced.graph, trace_problem(problem, again, other).graph, ref, size)
    except NotGeneric as exc:
        plan.static_reason = str(exc)
    except UnsupportedError as exc:
        plan.static_reason = f"the reference at leading size {size} cannot be written: {exc}"


def _export_other(problem: Problem, size: int) -> Exported | str:
    """The reference exported at leading size ``size``, or why it does not accept that size. As the
    evaluator's ``generalize`` check: every input sharing the leading size resized, else (``A @ B`` with
    M == K) the first alone."""
    from tritonsmith.agents.builtin._trace import export_problem

    why = ""
    for first_only in (False, True):
        try:
            return export_problem(problem, lead=size, first_only=first_only)
        except Exception as exc:  # the reference rejects the size (a baked-in batch size): its limit, not our bug
            why = why or f"{type(exc).__name__}: {str(exc)[:200]}"
    return f"the reference does not accept leading size {size}: {why}"


class BuiltinGenerator:
    """Rule-based generator (no LLM). ``generate`` is deterministic for a given request history."""

    name = "builtin"

    def __init__(self) -> None:
        self._states: dict[tuple[str, int], _ProblemState] = {}

    def _state(self, problem: Problem) -> _ProblemState:
        key = (problem.name, hash(problem.source))
        if key not in self._states:
            self._states[key] = _ProblemState(problem)
        return self._states[key]

    def generate(self, request: GenerationRequest) -> Candidate:
        from tritonsmith.agents.builtin._emit import emit_module
        from tritonsmith.agents.builtin._variants import choose_variant, remaining

        problem = _evaluated_problem(request)
        state = self._state(problem)
        if state.error is not None:
            return Candidate(source=None, note=f"builtin: cannot write this problem: {state.error}", exhausted=True)
        if state.bug is not None:
            return Candidate(source=None, exhausted=True, error=state.bug,
                             note=f"builtin: internal error while planning: {_last_line(state.bug)}")
        history = list(request.history)
        unwritable: list[str] = []  # why variants of this call could not be written
        while True:
            variant = choose_variant(tuned_first(state.menu, request.tuned_variants), history)
            if variant is None:
                from tritonsmith.agents.builtin._hints import NEAR_PEAK_NOTE, profile_hints

                why = NEAR_PEAK_NOTE if "near_peak" in profile_hints(history) else \
                    f"all {len(state.menu)} variants tried; no further ideas"
                if unwritable and not any(a.source for a in request.history):
                    why = f"cannot write this problem: {unwritable[0]}"  # every variant failed at the same op
                return Candidate(source=None, exhausted=True, note=f"builtin: {why}")
            try:
                traced, plan, source = _write(problem, state, variant)
            except UnsupportedError as exc:
                log.info("builtin: variant %s of %s not writable: %s", variant.key, problem.name, exc)
                from tritonsmith.agents.base import Attempt

                unwritable.append(str(exc))
                history.append(Attempt(iteration=-1, source=None, result=None, feedback=str(exc), reward=0.0,
                                       generator=self.name, variant=variant.key))
                continue
            except Exception:  # our bug in this variant: an error attempt; the next iteration tries the next one
                log.exception("builtin: variant %s of %s failed", variant.key, problem.name)
                tb = traceback.format_exc(limit=20)
                return Candidate(source=None, variant=variant.key, error=tb,
                                 note=f"builtin: internal error in variant {variant.key}: {_last_line(tb)}",
                                 exhausted=remaining(state.menu, history, variant) == 0)
            break
        return Candidate(source=source, note=_note(variant, traced, plan), variant=variant.key,
                         exhausted=remaining(state.menu, request.history, variant) == 0)


# why a Triton convolution of fp32 data starts behind the reference: said where one is written
_CONV_PRECISION_NOTE = ("Triton convolutions in tf32x3 (fp32 accuracy: three tensor-core passes; PyTorch runs "
                        "cuDNN's fp32 convolutions in TF32, one pass)")


def _note(variant: Any, traced: Any, plan: Any) -> str:
    """The candidate's note: kernel kinds, variant, rewrites, torch ops kept, shapes, and what bounds a
    Triton convolution's speed."""
    kinds = ", ".join(sorted({g.kind for g in plan.groups if g.kind != "torch"}))
    note = f"builtin: {len([g for g in plan.groups if g.kind != 'torch'])} Triton kernel(s) ({kinds}); " \
           f"variant {variant.key}: {variant.why}"
    if traced.rewrites:
        note += f"; rewrites: {', '.join(traced.rewrites)}"
    from tritonsmith.agents.builtin._variants import split_k_fired

    if fired := split_k_fired(plan):
        note += f"; {', '.join(fired)}"
    if plan.torch_ops:
        note += f"; hybrid: torch ops remain: {', '.join(plan.torch_ops)}"
    note += "; shape-generic: the leading dimension is a run-time size" if plan.lead is not None else \
        f"; shape-specialised ({plan.static_reason or 'asked for'})"
    import torch

    from tritonsmith.agents.builtin._partition import CONVS

    precision = variant.overrides.get(CONVS, {}).get("precision", "tf32x3")
    if precision == "tf32x3" and any(g.kind == CONVS and g.nodes[0].dtype == torch.float32 for g in plan.groups):
        note += f"; {_CONV_PRECISION_NOTE}"
    return note


def _write(problem: Problem, state: _ProblemState, variant: Any) -> tuple[Any, Any, str]:
    """(traced, plan, source) of ``variant``: shape-generic where the plan allows it (``emit_module`` writes
    it shape-specialised where a kernel cannot take the leading size at run time, and the plan says why)."""
    from tritonsmith.agents.builtin._emit import emit_module

    traced, plan = _plan(problem, variant.options, state.exported, state.other)
    source = emit_module(problem.name, problem.source, traced, plan, variant.overrides,
                         variant_label(variant, traced))
    return traced, plan, source


def _evaluated_problem(request: GenerationRequest) -> Problem:
    """The problem the evaluator runs: ``request.problem``, scaled down when the run scales it (``--scale``):
    kernels written for the original sizes would be checked at other ones."""
    if not request.scale:
        return request.problem
    from tritonsmith.core.problem import ProblemError

    try:
        return request.problem.scaled()
    except ProblemError:  # not scalable: the evaluator reports it; write for the problem as given
        return request.problem


def _last_line(tb: str) -> str:
    lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:400] if lines else "unknown error"


def summarize(problem: Problem) -> PlanSummary:
    """Without writing code: can the generator emit this problem, and with which kernels."""
    try:
        _, plan = _plan(problem, {}, None)
    except UnsupportedError as exc:
        return PlanSummary(problem=problem.name, emittable=False, reason=str(exc))
    except Exception as exc:  # tracing arbitrary user code: report the failure as the reason
        return PlanSummary(problem=problem.name, emittable=False, reason=f"{type(exc).__name__}: {exc}")
    return PlanSummary(problem=problem.name, emittable=True,
                       kernels=tuple(g.kind for g in plan.groups if g.kind != "torch"),
                       torch_ops=tuple(plan.torch_ops))
