"""Launch configurations and the variants the generator tries, in order, using the evaluator's feedback."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tritonsmith.agents.base import Attempt
from tritonsmith.agents.builtin._convcl import eligible, plan_network
from tritonsmith.agents.builtin._convgemm import nhwc_ok
from tritonsmith.agents.builtin._hints import order_by_hints, profile_hints
from tritonsmith.agents.builtin._ir import PW, SMS, Node
from tritonsmith.agents.builtin._kernelbase import next_pow2
from tritonsmith.agents.builtin._matmul import mm_shapes
from tritonsmith.agents.builtin._partition import (
    CONVS, MATMUL, POINTWISE, ROW, SCANS, TORCH, WINDOWS, Group, Plan,
)
from tritonsmith.agents.builtin._rowkernel import TARGET_PROGRAMS, split_plan
from tritonsmith.core.results import EvalStatus

__all__ = ["Variant", "choose_variant", "group_config", "remaining", "variant_menu"]



@dataclass(frozen=True)
class Variant:
    """One way to write the kernels: graph rewrites (``options``) and per-kind launch overrides."""

    key: str
    why: str
    options: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)


def group_config(g: Group, overrides: dict[str, Any]) -> dict[str, Any]:
    """Heuristic launch configuration for a group, then the variant's overrides."""
    cfg: dict[str, Any] = {}
    if g.kind == POINTWISE:
        cfg = {"BLOCK": 1024, "num_warps": 4}
    elif g.kind == MATMUL:
        cfg = _matmul_config(g, presplit=bool(overrides.get("presplit")))
    elif g.kind == ROW and g.domain is not None:
        cfg = _row_config(g)
    elif g.kind == WINDOWS:
        cfg = {"BLOCK": 1024, "num_warps": 4}
    elif g.kind == SCANS and g.domain is not None:
        cfg = _scan_config(g, int(overrides.get("tile", 4096)))
    elif g.kind == CONVS:
        cfg = _conv_config(g)
    cfg.update({k: v for k, v in overrides.items() if k not in ("tile", "presplit")})
    return cfg


def _scan_config(g: Group, tile: int) -> dict[str, Any]:
    """Blocks of about ``tile`` elements. Scans along the contiguous dim: up to 2048 of a row per block, a
    few short rows per program; scans across memory (the rows are the contiguous index): many rows side by
    side (coalesced loads), a shorter stretch of each per block."""
    dom = g.domain
    assert dom is not None
    r = next_pow2(dom.r)
    if dom.reduce_contiguous or not dom.kept_runs or dom.kept_runs[-1][1] != 1:
        block_r = min(r, tile // 2)
        block_k = max(1, min(16, tile // 2 // block_r, next_pow2(dom.k)))
    else:
        block_k = min(64, next_pow2(dom.k))
        block_r = max(1, min(r, tile // block_k))
    return {"BLOCK_K": block_k, "BLOCK_R": block_r, "num_warps": 8 if block_k * block_r >= 4096 else 4}


def _conv_config(g: Group) -> dict[str, Any]:
    """Implicit-GEMM convolution tiles: 128 rows (output positions) x up to 64 output channels x 32 of K,
    8 warps, 3 stages, in-loop tf32x3 for fp32 (the matmul family's default shape: under the in-loop split
    128x128 tiles spilled, sm_90 AOT); narrower columns where a group has few output channels (a dot needs
    at least 16)."""
    n = g.nodes[0]
    groups = int(n.attrs["groups"])
    cout_g = n.shape[1] // groups
    k = n.args[0].shape[1] // groups
    for s in n.attrs["kernel"]:
        k *= s
    bn = min(64, max(16, next_pow2(cout_g)))
    return {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": 16 if k <= 16 else 32, "num_warps": 8,
            "num_stages": 3, "precision": "tf32x3"}


def _conv_variants(plan: Plan, base_opts: dict[str, Any]) -> list[Variant]:
    """Variants of a plan whose convolutions are written in Triton (a pure convolution problem): other
    tiles, then cuDNN (writable only where a Triton kernel remains besides the bias: otherwise a torch
    wrapper, skipped)."""
    # 128x128 tiles spilled 52 registers on KernelBench 50_conv_standard_2D (11x11 filter, sm_90 AOT): not offered
    out = [Variant("conv-64x64", "64x64 convolution tiles, 4 warps, 3 stages (more programs)", base_opts,
                   {CONVS: {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}})]
    convs = [g.nodes[0] for g in plan.groups if g.kind == CONVS]
    if convs and all(nhwc_ok(plan, n) for n in convs):
        # second, before other tiles: NCHW gathers the A tile in 4-byte copies (sm_90 PTX of KernelBench 56),
        # channels-last reads whole 16-byte channel vectors; the copies cost one pass over input and filter
        # tiles from the H100 sweep (2026-12-08, benchmarks/results/h100-2026-12-08-s19): on KernelBench 56 and
        # 62, 256x64x16 (8 warps, 3 stages) ran 1.8x faster than 128x64x32 (16.5 ms against 30.2, 10.7 against
        # 19.0) and 16-deep steps beat 32-deep ones at every tile; transposed convolutions were not swept
        tiles = {} if any(n.attrs["transposed"] for n in convs) else {"BLOCK_M": 256, "BLOCK_K": 16}
        out.insert(0, Variant("conv-nhwc", "convolutions over channels-last copies of input and filter (k: tap, "
                              "then channel; 16-byte tile loads)", base_opts, {CONVS: {"layout": "nhwc", **tiles}}))
    if any(g.kind == CONVS and g.nodes[0].attrs["transposed"] and any(s > 1 for s in g.nodes[0].attrs["stride"])
           for g in plan.groups):
        # the gather form computes its indices per element of the A tile: 128x32 of them spilled 38 registers
        # on 4 warps (sm_90 AOT, KernelBench 75_conv_transposed_2D), 128x16 on 8 warps none
        out.append(Variant("conv-gather", "strided transposed convolutions in gather form (every tap, those between "
                           "input positions masked) instead of by output phases", base_opts,
                           {CONVS: {"phases": False, "BLOCK_K": 16}}))
    out.append(Variant("conv-cudnn", "the convolutions as torch (cuDNN) calls, the rest in Triton",
                       {**base_opts, "conv": "torch"}, {}))
    return out


def mm_intensity(g: Group) -> float:
    """FLOPs per byte of the operands (2 M N K / 4 (M K + K N) per batch): the hi/lo pre-split of 3xTF32
    costs about 3x the operand bytes, so it pays only where this is high."""
    mm = g.nodes[0]
    a = mm.args[0]
    m, n, k = mm.shape[-2], mm.shape[-1], a.shape[-1]
    return 2 * m * n * k / (4 * (m * k + k * n))


_WIDE_EPILOGUE_OPS = 2


def _fp32_operands(g: Group) -> bool:
    return all(a.dtype == torch.float32 for a in g.nodes[0].args)


_ALIGNED_FIRST_FLOPS = 1 << 34  # 17 GFLOP: ~3 ms in tf32x3 on an H200, against ~0.1 ms of copies


def misaligned(plan: Plan, g: Group) -> bool:
    """Some operand's rows do not start on 16-element boundaries, or K or N is not a multiple of 16.

    Triton then moves the matmul's tiles in 4-byte pieces: compiled for sm_90, the 8205x2949 @ 2949x5921
    GEMM of KernelBench's 8_Matmul_with_irregular_shapes issues 72 four-byte ``cp.async`` per thread where
    the same kernel on padded operands issues 18 sixteen-byte ones (it ran at 0.43x of torch.compile on the
    H200, 2026-12-04, against 1.26-1.60x for the aligned level-2 GEMMs).
    """
    s = mm_shapes(plan, g)
    (_, sam, sak), (_, sbk, sbn) = s.a[1], s.b[1]
    strides = [x for x in (s.a[1][0], sam, sak, s.b[1][0], sbk, sbn) if x not in (0, 1)]
    return s.k % 16 != 0 or s.n % 16 != 0 or s.a[2] % 16 != 0 or s.b[2] % 16 != 0 or \
        any(x % 16 for x in strides)


def mm_flops(g: Group) -> int:
    mm = g.nodes[0]
    return 2 * math.prod(mm.shape) * mm.args[0].shape[-1]


def _presplit_pays(g: Group) -> bool:
    """fp32 operands whose intensity repays the hi/lo split pass (about 3x the operand bytes)."""
    return _fp32_operands(g) and mm_intensity(g) >= 128


def _matmul_config(g: Group, presplit: bool = False) -> dict[str, Any]:
    """Hopper tiles: 128x128x32 (8 warps) by default, 64-wide where M or N is small.

    Precision for fp32 operands: Triton's in-loop ``tf32x3`` on 128x64x32 tiles, 8 warps, 3 stages (compiled
    for sm_90 with Triton 3.9: 0 spills under a bias, GELU or transposed-B epilogue, where 128x128 tiles
    spilled 70-72 registers with a linear layer's K-major weight) unless ``presplit`` asks for operands
    pre-split into tf32 hi/lo parts (3xTF32: one pipelined tf32 dot over 3K, 4 stages). Measured on the H200 (2026-12-03 suite run, same problems, same
    run): in-loop tf32x3 1.06-1.31x of torch.compile on 13 level-2 GEMMs, the pre-split 0.47-0.49x.
    128x256 tiles (3 stages, 144 KB) only without the in-loop split, for a long K loop and a light epilogue,
    when M and N give at least two waves of them.
    """
    mm = g.nodes[0]
    m, n = mm.shape[-2], mm.shape[-1]
    bsz = mm.shape[0] if len(mm.shape) == 3 else 1
    fp32 = _fp32_operands(g)
    presplit = presplit and _presplit_pays(g)
    cfg: dict[str, Any] = {"BLOCK_M": 128 if m > 64 else 64, "BLOCK_N": 128 if n > 64 else 64, "BLOCK_K": 32,
                           "GROUP_M": 8, "num_warps": 8, "num_stages": 4,
                           "precision": "3xtf32" if presplit else "tf32x3"}
    if fp32 and not presplit:
        # K of at most 64: one 64-deep step instead of two 32-deep ones (H100, 2026-12-08, KernelBench 7,
        # 32768x64 @ 64x32768: 3.17 ms against 4.97; 123 registers, sm_90 AOT)
        cfg.update(BLOCK_N=64, BLOCK_K=64 if 32 < mm.args[0].shape[-1] <= 64 else 32, num_stages=3)
        return cfg
    # Wide tiles only for a long K loop and a light epilogue (no other tensor read, at most two ops): compiled
    # ahead of time for sm_90 (benchmarks/builtin_aot.py, 2026-12-02), 128x256 tiles spilled 170-252
    # registers where the epilogue loads a bias or scale or K = 64, 496 under GELU * sigmoid + tanh, while
    # 128x128 tiles spilled 0-4; a 1024-deep bmm (202 registers) and relu * 0.5 kept 128x256 without spills.
    inside = {id(x) for x in g.nodes}
    epilogue_loads = any(isinstance(a, Node) and id(a) not in inside for x in g.nodes[1:] for a in x.args)
    light = not epilogue_loads and sum(1 for x in g.nodes[1:] if x.kind == PW) <= _WIDE_EPILOGUE_OPS
    wide = m >= 128 and n >= 256 and mm.args[0].shape[-1] >= 256 and light
    if wide and bsz * -(-m // 128) * -(-n // 256) >= 2 * SMS:
        cfg.update(BLOCK_N=256, num_stages=3)
    return cfg


def _row_config(g: Group) -> dict[str, Any]:
    dom = g.domain
    assert dom is not None
    r = next_pow2(dom.r)
    channels_last = _reads_channels_last(g)  # then the channel is the contiguous index, whatever the logical order
    if channels_last and 1 not in dom.dims:
        return _channel_rows_config(dom)
    if channels_last or not _across_memory(g):
        if r <= 4096:
            block_k = max(1, min(16, 4096 // r, next_pow2(dom.k)))
            return {"BLOCK_K": block_k, "BLOCK_R": r, "one_pass": True, "num_warps": 4 if r * block_k <= 2048 else 8}
        return {"BLOCK_K": 1, "BLOCK_R": 2048, "one_pass": False, "num_warps": 8}
    # rows run across memory (the kept index is the contiguous one): tile many rows side by side
    block_k = min(128, next_pow2(dom.k))
    if r * block_k <= 8192:
        return {"BLOCK_K": block_k, "BLOCK_R": r, "one_pass": True, "num_warps": 4}
    return {"BLOCK_K": block_k, "BLOCK_R": 32, "one_pass": False, "num_warps": 4}


def _channel_rows_config(dom: Any) -> dict[str, Any]:
    """Rows that are channels of a channels-last value (BatchNorm's statistics under net-cl): 16 channels
    side by side (64 contiguous bytes per position), split over positions; the combining pass reads a row
    block's partials in one [BLOCK_K, SPLIT] tile, so SPLIT stays at most 4096 / BLOCK_K."""
    block_k = min(16, next_pow2(dom.k))
    r = next_pow2(dom.r)
    fit = max(1, min(block_k, 4096 // r))  # one pass holds at most 4096 values (more spilled on sm_90)
    if fit >= min(8, block_k):  # and still loads whole sectors (8 channels: 32 bytes)
        return {"BLOCK_K": fit, "BLOCK_R": r, "one_pass": True, "num_warps": 4 if r * fit <= 2048 else 8}
    rows = -(-dom.k // block_k)
    # split from 2048 positions on (not SPLIT_MIN_R): 16 channels a program leave 64 channels 4 programs
    # 1024-value tiles over 8 warps: 4 values (one 16-byte load) a thread; 2048 spilled up to 28 registers in
    # DenseNet201's BatchNorm over 48 concatenated sources (sm_90)
    return {"BLOCK_K": block_k, "BLOCK_R": 1024 // block_k, "one_pass": False, "num_warps": 8,
            "target_programs": min(TARGET_PROGRAMS, rows * (4096 // block_k)), "split_min_r": 2048}


def _reads_channels_last(g: Group) -> bool:
    """Whether ``g`` reads a full-rank channels-last value (net-cl): BatchNorm's statistics then reduce over
    positions that lie C apart, so one row (channel) per program would load a 4-byte word per 32-byte
    sector; rows side by side load whole sectors (H200 2026-12-06: net-cl's BatchNorm networks ran at
    0.19-0.36x torch.compile against 0.46-0.63x for row-major)."""
    dom = g.domain
    assert dom is not None
    return any(a.attrs.get("channels_last") and not g.has(a) and len(a.shape) == len(dom.shape)
               for n in g.nodes for a in n.node_args())


def _across_memory(g: Group) -> bool:
    """Rows whose kept index is the contiguous one (a reduction over a leading dim): see ``_row_config``."""
    dom = g.domain
    assert dom is not None
    return not (dom.reduce_contiguous or not dom.kept_runs or dom.kept_runs[-1][1] != 1)


def _split_k(plan: Plan) -> int:
    """Split the K loop of a lone small matmul with a long K over more programs (partials, then a sum), the
    same count for every matmul of the plan. Only where both operands are loadable as they are (not computed
    values). A matmul the lowering already split on its own (``split_k_for``) is judged by its unsplit sizes."""
    for g in plan.groups:
        mm = g.nodes[0]
        if g.kind != MATMUL or (len(mm.shape) != 2 and "split_k" not in mm.attrs):
            continue
        a, b = mm.args[0], mm.args[1]
        if not (a.addressable and b.addressable):
            return 0
        if "split_k" in mm.attrs:  # [S, m, k / S] @ [S, k / S, n]
            m, n, k = a.shape[1], mm.shape[2], a.shape[2] * mm.shape[0]
        else:
            m, n, k = a.shape[0], mm.shape[1], a.shape[1]
        tiles = -(-m // 128) * -(-n // 128)
        if tiles < SMS // 2 and k >= 8192:
            split = 1
            while tiles * split * 2 <= 2 * SMS and k % (split * 2 * 256) == 0:
                split *= 2
            return split if split > 1 else 0
    return 0


def split_k_fired(plan: Plan) -> list[str]:
    """The matmuls the lowering split along K on its own (``_lower.split_k_for``), as ``S x [m, k] @ [k, n]``."""
    fired = [g.nodes[0] for g in plan.groups if g.kind == MATMUL and "split_k" in g.nodes[0].attrs]
    said = [f"split-K x{mm.attrs['split_k']} of [{m}, {mm.shape[0] * k}] @ [{mm.shape[0] * k}, {n}]"
            for mm in fired for (m, k), n in [(mm.args[0].shape[1:], mm.shape[2])]]
    return [s + (f" ({said.count(s)} times)" if said.count(s) > 1 else "") for s in dict.fromkeys(said)]


def variant_menu(plan: Plan) -> list[Variant]:
    """The variants worth trying for this plan, best guess first (the second is the likeliest other winner)."""
    kinds = {g.kind for g in plan.groups}
    split = _split_k(plan)
    base_opts = {"split_k": split} if split else {}
    menu = [Variant("default", "heuristic block sizes" + (f", split-K x{split}" if split else ""), base_opts)]
    conv_cl = eligible(plan) is not None
    if conv_cl:
        # first: on the H200 cuDNN ran these convolutions 1.3-1.7x faster channels-last (_convcl.py)
        menu.insert(0, Variant("conv-cl", "channels-last convolution (Triton input transpose) and epilogue",
                               {**base_opts, "conv_cl": True}, {POINTWISE: {"channels_last": True}}))
    if CONVS in kinds and MATMUL not in kinds:
        menu.append(Variant("ieee", "fp32 dot with input_precision='ieee' (the tf32 split missed the tolerance?)",
                            base_opts, {CONVS: {"precision": "ieee"}}))
    if MATMUL in kinds:
        menu += _matmul_variants(plan, base_opts)
        aligned = next((v for v in menu if v.key == "mm-aligned"), None)
        if aligned is not None and any(mm_flops(g) >= _ALIGNED_FIRST_FLOPS for g in plan.groups if g.kind == MATMUL):
            menu.remove(aligned)  # first where the GEMM is large: the copies cost ~0.1 ms, the 4-byte loads ~2x
            menu.insert(0, aligned)
        if split or split_k_fired(plan):
            menu.append(Variant("no-split-k", "one program per output tile", {"split_k": 0}, {}))
    if ROW in kinds:
        menu += _row_variants(plan, base_opts)
    if WINDOWS in kinds:
        menu += [Variant("window-256", "256 outputs per program, 2 warps (more programs for big windows)", base_opts,
                         {WINDOWS: {"BLOCK": 256, "num_warps": 2}}),
                 Variant("window-4096", "4096 outputs per program, 8 warps", base_opts,
                         {WINDOWS: {"BLOCK": 4096, "num_warps": 8}})]
    if CONVS in kinds:
        menu += _conv_variants(plan, base_opts)
    elif any(g.kind == TORCH and g.nodes[0].attrs.get("op") in ("conv", "conv_transpose") for g in plan.groups):
        if (net := _net_cl(plan, menu[0], conv_cl)) is not None:
            menu.insert(1, net)  # second: the row-major first variant stays first
        # cuDNN with a Triton epilogue stays first (verified on 85 of the dev split's 100 at 1.14x, H200
        # 2026-12-04); the implicit-GEMM convolution with the chain fused into its epilogue is the next idea
        menu.insert(min(2, len(menu)), Variant("conv-triton", "the convolutions as Triton implicit GEMMs with the "
                                               "elementwise chain fused into their epilogue",
                                               {**base_opts, "conv": "triton"}, {}))
        menu.append(Variant("conv-triton-m64", "Triton implicit-GEMM convolutions, 64x64 tiles, 4 warps",
                            {**base_opts, "conv": "triton"},
                            {CONVS: {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}}))
    if SCANS in kinds:
        menu += [Variant("scan-wide", "scan blocks of about 16K elements", base_opts, {SCANS: {"tile": 16384}}),
                 Variant("scan-1k", "scan blocks of about 1K elements", base_opts, {SCANS: {"tile": 1024}})]
    if POINTWISE in kinds:
        menu.append(Variant("pw-4096", "4096 elements per program, 8 warps", base_opts,
                            {POINTWISE: {"BLOCK": 4096, "num_warps": 8}}))
    if plan.lead is not None:  # last: the default's kernels specialised to the reference's shapes
        menu.append(Variant("static-shapes", "kernels specialised to every shape of the reference (the leading "
                            "dimension too)", {**base_opts, "static_shapes": True}))
    return menu


def _net_cl(plan: Plan, first: Variant, conv_cl: bool) -> Variant | None:
    """net-cl (``_convcl.plan_network``) on top of the ``first`` variant, where a network has several torch
    convolutions and at least one reads the channels-last output of a kernel before it, or where one
    convolution feeds reductions or windows (a single convolution with one pointwise epilogue, ``conv_cl``, is
    conv-cl's case). The second: on the H100 (2026-12-08, ``where_time_goes_gpu.py``) cuDNN ran KernelBench L2 67's and
    73's NCHW convolutions (8 input channels) in FP32 FFMA kernels, 2.66 and 0.67 ms, where torch.compile's
    channels-last call took a TF32 kernel, 1.31 and 0.33 ms."""
    net = plan_network(plan)
    single = net is not None and len(net.convs) == 1 and not conv_cl
    if net is None or not (single or (len(net.convs) >= 2 and net.direct)):
        return None
    pw = {**first.overrides.get(POINTWISE, {}), "channels_last": True}
    what = ("the convolution channels-last (a Triton input transpose) and the kernels reading it by its strides"
            if single else f"channels-last across the network: {len(net.convs)} convolutions, {len(net.direct)} "
            "without a transpose")
    return Variant("net-cl", what, {**first.options, "net_cl": True},
                   {**first.overrides, POINTWISE: pw})


def _matmul_variants(plan: Plan, base_opts: dict[str, Any]) -> list[Variant]:
    """ieee (only after a wrong tf32 answer), other tiles, then the pre-split 3xTF32 last: on the H200
    (2026-12-03 suite run) it ran at 0.47-0.49x of torch.compile on 10 GEMM problems where the in-loop
    tf32x3 default ran at 1.06-1.27x, and gave a wrong or rejected answer on 2 more."""
    groups = [g for g in plan.groups if g.kind == MATMUL]
    cfgs = [group_config(g, {}) for g in groups]
    in_loop = all(_fp32_operands(g) for g in groups)  # fp32 defaults are always the in-loop tf32x3
    ieee: dict[str, dict[str, Any]] = {MATMUL: {"precision": "ieee", "num_stages": 3}}
    if any(g.kind == CONVS for g in plan.groups):
        ieee[CONVS] = {"precision": "ieee"}
    out = [Variant("ieee", "fp32 dot with input_precision='ieee' (the tf32 split missed the tolerance?)",
                   base_opts, ieee)]
    if in_loop and all(c["BLOCK_K"] < 64 and _bare(g) for g, c in zip(groups, cfgs, strict=True)):
        # second for a matmul with nothing fused after it: on the H100 (2026-12-08 tile sweep) 128x64x64 ran
        # KernelBench 6 (256x524288 @ 524288x256) in 1.39 ms against the default's 1.69, where 128x128 took 3.9;
        # under an epilogue the 64-deep step spilled 18-54 registers (sm_90 AOT, level 2's 16 GEMMs), so not there;
        # bare, level 1's 3, 6, 11 and 16 compiled without spills but a 4096x1024 @ 1024x1024 spilled 24 (Triton
        # 3.9): the evaluator's timing, not this rule, decides whether it is kept
        out.append(Variant("mm-k64", "64-deep K steps (128x64x64 tiles, 8 warps, 3 stages)", base_opts,
                           {MATMUL: {"BLOCK_K": 64}}))
    if in_loop:
        # 128x128 won on one problem of 13 (1.61x vs 1.31x); under the in-loop split 64x128 tiles with 4 warps
        # spilled 28-76 registers (sm_90 AOT), 64x64 none
        out.append(Variant("mm-128x128", "128x128x32 tiles, 8 warps, 3 stages", base_opts,
                           {MATMUL: {"BLOCK_N": 128, "num_stages": 3}}))
        out.append(Variant("mm-64x64", "smaller matmul tiles, 4 warps, 4 stages", base_opts,
                           {MATMUL: {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4}}))
    else:
        if any(c["BLOCK_N"] == 256 for c in cfgs):
            out.append(Variant("mm-128x128", "128x128x32 tiles, 8 warps, 4 stages", base_opts,
                               {MATMUL: {"BLOCK_N": 128, "num_stages": 4}}))
        else:  # 128x256x32 tiles, 3 stages: 144 KB of shared memory for fp32 (H100/H200: 227 KB)
            out.append(Variant("mm-128x256", "larger matmul tiles (128x256x32, 3 stages)", base_opts,
                               {MATMUL: {"BLOCK_N": 256, "BLOCK_K": 32, "num_stages": 3}}))
        out.append(Variant("mm-64x128", "smaller matmul tiles, 4 warps, 4 stages", base_opts,
                           {MATMUL: {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 4}}))
    if in_loop and any(misaligned(plan, g) for g in groups):
        # the default 128x64 tiles: 128x128 ones spilled 56 registers under a linear layer's bias (sm_90 AOT)
        out.append(Variant("mm-aligned", "operands copied into zero-padded scratch with 16-element-aligned rows "
                           "first (16-byte tile loads, no masks)", base_opts, {MATMUL: {"pad": True}}))
    if any(_presplit_pays(g) for g in groups):
        out.append(Variant("mm-3xtf32", "operands pre-split into tf32 hi/lo (one pipelined tf32 dot over 3K; "
                           "128x256 tiles where they fit)", base_opts, {MATMUL: {"presplit": True}}))
    return out


def _bare(g: Group) -> bool:
    """A matmul with no elementwise op fused after it (views and the store only)."""
    return not any(x.kind == PW for x in g.nodes[1:])


def _row_variants(plan: Plan, base_opts: dict[str, Any]) -> list[Variant]:
    rows = [g for g in plan.groups if g.kind == ROW and g.domain is not None]
    splits = [split_plan(g, group_config(g, {}))[0] > 1 for g in rows]
    out = []
    if any(splits):
        out.append(Variant("row-split-2x", "twice as many chunks per split row", base_opts,
                           {ROW: {"target_programs": 2 * TARGET_PROGRAMS}}))
        out.append(Variant("row-nosplit", "one program per row block (no split)", base_opts, {ROW: {"split": 1}}))
    elif any(split_plan(g, {**group_config(g, {}), "split_min_r": 8192,
                            "target_programs": 4 * TARGET_PROGRAMS})[0] > 1 for g in rows):
        out.append(Variant("row-split", "rows split into chunks over more programs", base_opts,
                           {ROW: {"split_min_r": 8192, "target_programs": 4 * TARGET_PROGRAMS}}))
    if rows and all(_across_memory(g) for g in rows):
        # Rows that run across memory are tiled BLOCK_K columns wide: wider row chunks would multiply the tile
        # (on the H200, 2026-12-03, "row-wide" made 128x4096 tiles: 0.51x and 0.23x where the default ran at
        # 1.0x on 47_Sum and 49_Max reduction, and a timeout on 51_Argmax); vary the columns instead.
        out.append(Variant("row-cols-256", "256 columns of rows per program, 8 warps", base_opts,
                           {ROW: {"BLOCK_K": 256, "num_warps": 8}}))
        out.append(Variant("row-cols-32", "32 columns per program, 128-wide row tiles", base_opts,
                           {ROW: {"BLOCK_K": 32, "BLOCK_R": 128, "num_warps": 4}}))
    else:
        out.append(Variant("row-wide", "wider row chunks, 8 warps", base_opts,
                           {ROW: {"BLOCK_R": 4096, "num_warps": 8, "one_pass": False}}))
        out.append(Variant("row-multipass", "multi-pass rows with 1024-wide chunks", base_opts,
                           {ROW: {"one_pass": False, "BLOCK_R": 1024, "num_warps": 4}}))
    out.append(Variant("row-unpaired", "statistics without the Welford / online-softmax pairing", base_opts,
                       {ROW: {"fuse_stats": False}}))
    return out


def choose_variant(menu: Sequence[Variant], history: Sequence[Attempt]) -> Variant | None:
    """The next untried variant, in menu order.

    After a wrong output from a tf32x3 matmul every later variant uses ``input_precision="ieee"``
    (the ``ieee`` variant first); otherwise the ``ieee`` variant is skipped (slower, same answer).
    After a timeout, variants that spread the work wider go first. Otherwise the profile of the latest
    verified attempt orders them (its advice codes, see ``_hints``), and ends the search when it puts that
    kernel within reach of the speed of light.
    """
    keys = {v.key for v in menu}
    mine = [a for a in history if a.variant and a.variant.removesuffix("+ieee") in keys
            and a.generator in ("builtin", "")]
    tried = {a.variant.removesuffix("+ieee") for a in mine if a.variant}
    wrong = any(a.result is not None and not (a.variant or "").endswith("ieee") and (
        a.result.status is EvalStatus.WRONG_OUTPUT
        or (a.result.status is EvalStatus.REJECTED and a.result.rule == "precision_lowered")) for a in mine)
    left = [v for v in menu if v.key not in tried and (wrong or v.key != "ieee")]
    hints = profile_hints(mine)
    if not left or (not wrong and "near_peak" in hints):
        return None
    left = order_by_hints(left, hints)
    last = mine[-1] if mine else None
    pick = left[0]
    if wrong and any(v.key == "ieee" for v in left):
        pick = next(v for v in left if v.key == "ieee")
    elif last is not None and last.result is not None and last.result.status is EvalStatus.TIMEOUT:
        pick = next((v for v in left if any(w in v.key for w in ("split", "wide", "4096"))), pick)
    if wrong and pick.key != "ieee":
        overrides = {**pick.overrides, MATMUL: {**pick.overrides.get(MATMUL, {}), "precision": "ieee"},
                     CONVS: {**pick.overrides.get(CONVS, {}), "precision": "ieee"}}
        pick = Variant(pick.key + "+ieee", pick.why + "; fp32 dot in ieee precision", pick.options, overrides)
    return pick


def remaining(menu: Sequence[Variant], history: Sequence[Attempt], chosen: Variant) -> int:
    """How many variants would still be left after ``chosen``."""
    keys = {v.key for v in menu}
    tried = {a.variant.removesuffix("+ieee") for a in history if a.variant and a.variant.removesuffix("+ieee") in keys}
    tried.add(chosen.key.removesuffix("+ieee"))
    return len([v for v in menu if v.key not in tried and v.key != "ieee"])
