"""The built-in generator's implicit-GEMM convolutions (``_convgemm.py``): dense, grouped, dilated, strided,
transposed (with output_padding), 1-D to 3-D, with bias and a fused elementwise chain; small odd shapes run
for real on the Triton interpreter against the reference (atol = rtol = 1e-4, two trials of fresh random
inputs); the variant menus (Triton first for a pure convolution, cuDNN first where a chain follows); and
every tile configuration compiled ahead of time for sm_90 without spills."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from typing import Any

import pytest

from tritonsmith.agents.base import Candidate, GenerationRequest
from tritonsmith.agents.builtin import BuiltinGenerator, _plan, summarize
from tritonsmith.agents.builtin._emit import emit_module
from tritonsmith.agents.builtin._variants import Variant, variant_menu
from tritonsmith.core.problem import Problem

from _builtin_check import run_on_interpreter

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _module(name: str, layer: str, shape: str, chain: str = "y", prologue: str = "x") -> Problem:
    """``chain`` (an expression of the layer's output ``y``) runs after ``self.layer(prologue)``."""
    src = (f"{_HEAD}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           f"        self.layer = {layer}\n        self.scale = nn.Parameter(torch.randn(1))\n\n"
           f"    def forward(self, x):\n        y = self.layer({prologue})\n        return {chain}\n\n\n"
           f"def get_inputs():\n    return [torch.randn({shape})]\n\n\ndef get_init_inputs():\n    return []\n")
    return Problem.from_source(src, name=name)


CASES: dict[str, Problem] = {
    "c2d_s2_p1_bias": _module("c2d_s2_p1_bias", "nn.Conv2d(3, 5, 3, stride=2, padding=1)", "2, 3, 9, 11"),
    "c2d_asym_nobias": _module("c2d_asym_nobias", "nn.Conv2d(4, 7, (3, 5), stride=(1, 2), padding=(2, 1), bias=False)",
                               "3, 4, 7, 10"),
    "c1d_dil_stride": _module("c1d_dil_stride", "nn.Conv1d(5, 6, 3, stride=3, dilation=4, bias=False)", "2, 5, 37"),
    "c3d_pad": _module("c3d_pad", "nn.Conv3d(3, 5, (2, 3, 3), padding=(1, 0, 1), stride=(1, 2, 1))", "2, 3, 5, 7, 6"),
    "c2d_groups_dil": _module("c2d_groups_dil", "nn.Conv2d(6, 9, 3, padding=2, dilation=2, groups=3)", "2, 6, 8, 9"),
    "c2d_pointwise": _module("c2d_pointwise", "nn.Conv2d(7, 5, 1, bias=False)", "2, 7, 5, 9"),
    "c2d_long_k": _module("c2d_long_k", "nn.Conv2d(9, 4, 5, padding=2)", "1, 9, 6, 7"),  # K = 225: many K tiles
    "t2d_outpad_groups": _module("t2d_outpad_groups",
                                 "nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), "
                                 "dilation=(2, 1), groups=2)", "2, 4, 5, 7"),
    "t1d_s2_d2": _module("t1d_s2_d2", "nn.ConvTranspose1d(3, 5, 3, stride=2, padding=1, dilation=2, bias=False)",
                         "2, 3, 13"),
    "t3d_s2_groups": _module("t3d_s2_groups", "nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1, "
                                              "groups=2)", "1, 4, 3, 4, 5"),
    "t2d_s1": _module("t2d_s1", "nn.ConvTranspose2d(3, 4, (3, 5), padding=(1, 2), bias=False)", "2, 3, 6, 9"),
    "t2d_depthwise": _module("t2d_depthwise", "nn.ConvTranspose2d(3, 3, 3, stride=2, groups=3)", "2, 3, 5, 6"),
    "c2d_chain": _module("c2d_chain", "nn.Conv2d(3, 4, 3, stride=2, padding=1)", "2, 3, 9, 10",
                         chain="torch.sigmoid(y) * self.scale - 0.25"),
    "c2d_strided_view": _module("c2d_strided_view", "nn.Conv2d(3, 4, (2, 3), padding=(1, 0))", "2, 3, 9, 10",
                                prologue="x.transpose(2, 3)"),
    # multiples of 16 input channels per group: the channels-last variant (conv-nhwc) is on their menus
    "n2d_s2_p1_bias": _module("n2d_s2_p1_bias", "nn.Conv2d(16, 5, 3, stride=2, padding=1)", "2, 16, 9, 11"),
    "n1d_dil_pad": _module("n1d_dil_pad", "nn.Conv1d(32, 6, 3, stride=3, dilation=4, padding=2, bias=False)",
                           "2, 32, 37"),
    "n3d_pad_groups": _module("n3d_pad_groups", "nn.Conv3d(32, 6, (2, 3, 3), padding=(1, 0, 1), stride=(1, 2, 1), "
                                                "groups=2)", "1, 32, 5, 7, 6"),
    "nt2d_s1_groups": _module("nt2d_s1_groups", "nn.ConvTranspose2d(32, 6, (3, 5), padding=(1, 2), dilation=(1, 2), "
                                                "groups=2)", "2, 32, 6, 9"),
}


# cases also run in another variant: name -> (case, variant key)
OTHER_VARIANTS = {"t2d_outpad_groups_gather": ("t2d_outpad_groups", "conv-gather"),
                  "t3d_s2_groups_gather": ("t3d_s2_groups", "conv-gather"),
                  "c2d_chain_triton": ("c2d_chain", "conv-triton"),
                  **{f"{n}_nhwc": (n, "conv-nhwc") for n in ("n2d_s2_p1_bias", "n1d_dil_pad", "n3d_pad_groups",
                                                            "nt2d_s1_groups")}}


@pytest.fixture(scope="module")
def generated() -> dict[str, Candidate]:
    """The first candidate of each case (the chain's is cuDNN + a Triton epilogue), and the variants of
    ``OTHER_VARIANTS``: strided transposed convolutions in gather form, the chain as one Triton conv."""
    gen = BuiltinGenerator()
    out = {name: gen.generate(GenerationRequest(problem=p, iteration=0)) for name, p in CASES.items()
           if name != "c2d_chain"}
    for name, (case, key) in OTHER_VARIANTS.items():
        source, _ = _variant_source(CASES[case], key)
        out[name] = Candidate(source=source, note=key, variant=key)
    return out


def _variant_source(problem: Problem, key: str) -> tuple[str, Variant]:
    variant = next(v for v in variant_menu(_plan(problem, {}, None)[1]) if v.key == key)
    traced, plan = _plan(problem, variant.options, None)
    return emit_module(problem.name, problem.source, traced, plan, variant.overrides, variant.key), variant


@pytest.fixture(scope="module")
def interpreted(generated: dict[str, Candidate], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """All candidates checked in one interpreter subprocess (startup dominates the cost)."""
    pairs = {name: (CASES[OTHER_VARIANTS[name][0]] if name in OTHER_VARIANTS else CASES[name]).source
             for name in generated}
    return run_on_interpreter(tmp_path_factory.mktemp("builtin_convgemm"),
                              {name: (ref, generated[name].source) for name, ref in pairs.items()})


@pytest.mark.parametrize("name", [n for n in CASES if n != "c2d_chain"] + list(OTHER_VARIANTS))
def test_convolution_matches_reference_on_interpreter(name: str, generated: dict[str, Candidate],
                                                      interpreted: dict[str, Any]) -> None:
    cand = generated[name]
    assert cand.source is not None, cand.note
    assert "_conv_0_kernel" in cand.source and "tl.dot(" in cand.source
    assert "F.conv" not in cand.source and "hybrid" not in (cand.note or "")
    result = interpreted[name]
    assert result["ok"], result["detail"]
    transposed = CASES[OTHER_VARIANTS[name][0] if name in OTHER_VARIANTS else name].source.count("ConvTranspose")
    if name.endswith("_nhwc"):
        assert ".permute(" in cand.source and "channels-last copies" in cand.source
    if transposed and name.endswith("_gather"):
        assert "gather form" in cand.source and "uc0 % " in cand.source
    elif transposed and not name.endswith("_nhwc") and "stride=" in CASES[name].source:
        assert "by output phases" in cand.source  # the taps between input positions are never visited


def test_pure_convolutions_are_written_in_triton_first() -> None:
    """A problem that is only a convolution (and a bias) gets the Triton conv as its default variant, with
    tf32x3 dots; cuDNN is on the menu but would be a torch wrapper, so it is not writable there."""
    problem = CASES["c2d_s2_p1_bias"]
    summary = summarize(problem)
    assert summary.emittable and summary.kernels == ("conv",) and not summary.torch_ops
    menu = variant_menu(_plan(problem, {}, None)[1])
    assert menu[0].key == "default"
    assert {"conv-64x64", "conv-cudnn", "ieee"} <= {v.key for v in menu}
    cudnn = next(v for v in menu if v.key == "conv-cudnn")
    with pytest.raises(Exception, match="nothing to write in Triton"):
        _plan(problem, cudnn.options, None)
    assert "input_precision=PRECISION" in (src := _variant_source(problem, "default")[0]) and "'tf32x3'" in src
    assert "PRECISION='ieee'" in _variant_source(problem, "ieee")[0]


def test_conv_chain_keeps_cudnn_first_and_offers_triton() -> None:
    """A convolution followed by an elementwise chain: the cuDNN + Triton epilogue path stays first (the
    variants that verified on the H200), the Triton implicit GEMM with the chain fused comes after them."""
    problem = CASES["c2d_chain"]
    keys = [v.key for v in variant_menu(_plan(problem, {}, None)[1])]
    assert keys[:2] == ["conv-cl", "default"], keys
    assert keys.index("conv-triton") == 2 and "conv-triton-m64" in keys
    source, _ = _variant_source(problem, "conv-triton")
    assert "F.conv" not in source and "= _sigmoid(v" in source.split("def _conv_0(")[0]  # fused epilogue
    assert "F.conv2d" in _variant_source(problem, "default")[0]


def test_wrong_tf32_answer_switches_convolutions_to_ieee() -> None:
    """After a wrong output from the tf32x3 default, the next candidate is the ieee variant."""
    from tritonsmith.agents.base import Attempt
    from tritonsmith.core.results import EvalResult, EvalStatus

    problem = CASES["c2d_s2_p1_bias"]
    gen = BuiltinGenerator()
    first = gen.generate(GenerationRequest(problem=problem, iteration=0))
    wrong = Attempt(iteration=0, source=first.source, result=EvalResult(
        status=EvalStatus.WRONG_OUTPUT, message="wrong on trial 0", problem=problem.name, device="cuda",
        device_name="H200", tolerance="1e-4"),
                    feedback="max abs error 1e-2", reward=0.0, generator="builtin", variant=first.variant)
    second = gen.generate(GenerationRequest(problem=problem, iteration=1, history=[wrong]))
    assert second.variant == "ieee" and second.source is not None and "PRECISION='ieee'" in second.source


# -- ahead-of-time compilation for sm_90 (registers, spills) --------------------------------------------------
_AOT = {  # never run: realistic sizes, the dev split's shapes
    "conv2d": ("nn.Conv2d(64, 128, (5, 7))", "8, 64, 64, 32"),
    "conv2d_cin3": ("nn.Conv2d(3, 96, 11, stride=4, padding=2)", "16, 3, 224, 224"),
    "conv1d_dil": ("nn.Conv1d(64, 128, 3, stride=3, dilation=4, bias=False)", "4, 64, 4099"),
    "conv3d": ("nn.Conv3d(3, 64, (3, 5, 7))", "2, 3, 16, 32, 32"),
    "tconv2d_strided": ("nn.ConvTranspose2d(32, 64, (3, 5), stride=(2, 3), padding=(1, 2), dilation=(2, 1), groups=4)",
                        "4, 32, 32, 64"),
    "tconv3d": ("nn.ConvTranspose3d(32, 16, (3, 5, 7))", "2, 32, 8, 16, 16"),
    "tconv1d": ("nn.ConvTranspose1d(32, 64, 3, stride=2, padding=1, dilation=2)", "4, 32, 4099"),
}


def _aot_available() -> bool:
    try:
        from triton.backends.nvidia.compiler import get_ptxas  # noqa: F401
    except ImportError:
        return False
    return True


def _launches(source: str) -> list[tuple[str, dict[str, Any]]]:
    import ast

    out = []
    for call in ast.walk(ast.parse(source)):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name):
            out.append((call.func.value.id, {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}))
    return out


@pytest.mark.skipif(not _aot_available(), reason="Triton's CUDA backend (ptxas) is not installed")
@pytest.mark.parametrize("name", sorted(_AOT))
def test_every_conv_tile_compiles_for_sm90_without_spills(name: str, tmp_path: Path) -> None:
    """Each tile configuration of the problem's Triton conv variants (default, 64x64, the gather form of a
    strided transposed one; ``ieee`` has the default's tiles) compiles for sm_90 with at most 8 spilled
    registers (the bound of ``test_builtin_aot.py``)."""
    from tritonsmith.profiler._aot import compile_kernel

    layer, shape = _AOT[name]
    problem = _module(name, layer, shape)
    menu = [v for v in variant_menu(_plan(problem, {}, None)[1]) if v.key not in ("conv-cudnn", "ieee")]
    assert menu and menu[0].key == "default"
    for variant in menu:
        source, _ = _variant_source(problem, variant.key)
        path = tmp_path / f"aot_{name}_{variant.key.replace('-', '_')}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        launched = [(k, kw) for k, kw in _launches(source) if k.startswith("_conv_")]
        assert launched, f"{variant.key}: no conv kernel launched"
        for kernel, kw in launched:
            fn = getattr(module, kernel)
            options = {k: kw.pop(k) for k in ("num_warps", "num_stages") if k in kw}
            signature = {p: "constexpr" if p in kw else ("*fp32" if p.endswith("_ptr") else "i32")
                         for p in inspect.signature(fn.fn).parameters}
            facts = compile_kernel(fn, signature, kw, arch=90, **options)
            assert facts.error is None, f"{variant.key} {kernel}: {facts.error}"
            assert facts.spills is not None and facts.spills <= 8, f"{variant.key} {kernel}: {facts.describe()}"


def test_a_triton_convolutions_note_says_what_bounds_its_speed(generated: dict[str, Candidate]) -> None:
    """Against cuDNN's TF32 the fp32-accurate Triton convolution does three tensor-core passes: the note says
    so where one is written in tf32x3, and not where the convolution stays cuDNN's."""
    assert "tf32x3 (fp32 accuracy: three tensor-core passes" in generated["c2d_s2_p1_bias"].note
    chain = BuiltinGenerator().generate(GenerationRequest(problem=CASES["c2d_chain"], iteration=0))
    assert "hybrid: torch ops remain: conv" in chain.note and "tensor-core passes" not in chain.note


def test_channels_last_variant_loads_whole_channel_vectors() -> None:
    """Compiled for sm_90, the default (NCHW) implicit GEMM gathers its A tile in 4-byte copies; conv-nhwc reads
    16-byte channel vectors only. Offered where each group has a multiple of 16 input channels and a transposed
    convolution has stride 1; not for 3 input channels or strided transposed ones."""
    if not _aot_available():
        pytest.skip("Triton's CUDA backend (ptxas) is not installed")
    import re

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    def copies(source: str) -> set[int]:
        path = Path(__import__("tempfile").mkdtemp()) / "nhwc_ptx.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        (kernel, kw), = [(k, kw) for k, kw in _launches(source) if k.startswith("_conv_")]
        fn = getattr(module, kernel)
        options = {k: kw.pop(k) for k in ("num_warps", "num_stages") if k in kw}
        params = list(inspect.signature(fn.fn).parameters)
        sig = {p: "constexpr" if p in kw else ("*fp32" if p.endswith("_ptr") else "i32") for p in params}
        attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(params) if p.endswith("_ptr")}
        ptx = triton.compile(ASTSource(fn, sig, kw, attrs), target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]
        return {int(m, 16) for m in re.findall(r"cp\.async\.c[ag]\.shared\.global[^,]*,[^,]*,\s*(0x[0-9a-f]+)", ptx)}

    problem = _module("conv2d", *_AOT["conv2d"])
    assert 4 in copies(_variant_source(problem, "default")[0])
    assert copies(_variant_source(problem, "conv-nhwc")[0]) == {16}
    for name in ("conv2d_cin3", "tconv2d_strided"):
        keys = [v.key for v in variant_menu(_plan(_module(name, *_AOT[name]), {}, None)[1])]
        assert "conv-nhwc" not in keys, name


def test_channels_last_tiles_of_standard_and_transposed_convolutions() -> None:
    """conv-nhwc runs standard convolutions in 256x64x16 tiles (the H100 sweep's choice for KernelBench 56 and 62,
    where 16-deep K steps beat 32-deep ones at every tile); transposed ones, not swept, keep the default tiles."""
    from tritonsmith.agents.builtin._partition import CONVS

    def nhwc(case: str) -> dict:
        plan = _plan(CASES[case], {}, None)[1]
        return next(v for v in variant_menu(plan) if v.key == "conv-nhwc").overrides[CONVS]

    assert nhwc("n2d_s2_p1_bias") == {"layout": "nhwc", "BLOCK_M": 256, "BLOCK_K": 16}
    assert nhwc("n1d_dil_pad") == {"layout": "nhwc", "BLOCK_M": 256, "BLOCK_K": 16}
    assert nhwc("nt2d_s1_groups") == {"layout": "nhwc"}
