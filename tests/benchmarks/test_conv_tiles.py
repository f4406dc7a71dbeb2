"""benchmarks/conv_tiles_gpu.py: the tile grid it sweeps, the candidates it writes per configuration, and the
configurations an ahead-of-time run marks for the GPU sweep to skip."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.benchmarks._scripts import load_script

conv_tiles = load_script("conv_tiles_gpu")

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(6, 20, (3, 5), bias=False)

    def forward(self, x):
        return self.conv(x)

def get_inputs():
    return [torch.randn(3, 6, 13, 17)]

def get_init_inputs():
    return []
'''


def test_grid_keeps_columns_within_the_output_channels_and_tiles_bounded() -> None:
    for cout_g, widest in ((20, 32), (128, 128), (8, 16)):
        cfgs = conv_tiles.grid(cout_g)
        assert cfgs and max(c["BLOCK_N"] for c in cfgs) == widest
        assert all(c["BLOCK_M"] * c["BLOCK_N"] <= 256 * 64 for c in cfgs)
        assert len({conv_tiles.label(c) for c in cfgs}) == len(cfgs)


def test_each_configuration_is_written_into_the_launch_and_skips_are_honoured(tmp_path: Path) -> None:
    kb = tmp_path / "level1"
    kb.mkdir()
    path = kb / "7_conv_odd.py"
    path.write_text(textwrap.dedent(PROBLEM))
    _, cands = conv_tiles.sources(path, limit=3)
    assert len(cands) == 3
    for cfg, src in cands:
        launch = next(line for line in src.splitlines() if "_conv_0_kernel[" in line)
        assert f"BLOCK_M={cfg['BLOCK_M']}" in launch and f"BLOCK_N={cfg['BLOCK_N']}" in launch
        assert f"num_warps={cfg['num_warps']}" in launch and f"num_stages={cfg['num_stages']}" in launch
    skipped = {(path.stem, conv_tiles.label(cands[0][0]))}
    _, rest = conv_tiles.sources(path, limit=3, skip=skipped)
    assert conv_tiles.label(rest[0][0]) == conv_tiles.label(cands[1][0])


def test_aot_rows_for_the_gpu_sweep(tmp_path: Path) -> None:
    """--aot compiles for sm_90 without a GPU; its JSON is what --from-aot reads."""
    kb = tmp_path / "level1"
    kb.mkdir()
    (kb / "7_conv_odd.py").write_text(textwrap.dedent(PROBLEM))
    out = tmp_path / "aot.json"
    import sys

    argv, sys.argv = sys.argv, ["conv_tiles_gpu.py", str(tmp_path), "--aot", "--limit", "2", "--json", str(out)]
    try:
        assert conv_tiles.main() == 0
    finally:
        sys.argv = argv
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 and all(r["status"] == "ok" and r["registers"] > 0 for r in rows)


def test_channels_last_sweep_only_where_the_convolution_allows_it(tmp_path: Path) -> None:
    kb = tmp_path / "level1"
    kb.mkdir()
    odd, wide = kb / "7_conv_odd.py", kb / "8_conv_wide.py"
    odd.write_text(textwrap.dedent(PROBLEM))  # 6 input channels: no channels-last form
    wide.write_text(textwrap.dedent(PROBLEM).replace("nn.Conv2d(6,", "nn.Conv2d(16,").replace("3, 6, 13", "3, 16, 13"))
    assert conv_tiles.sources(odd, limit=2, layout="nhwc")[1] == []
    cands = conv_tiles.sources(wide, limit=2, layout="nhwc")[1]
    assert len(cands) == 2 and all(c["layout"] == "nhwc" and ".permute(" in src for c, src in cands)
    assert conv_tiles.label(cands[0][0]).endswith(" nhwc")
    # an --aot run of the channels-last form marks its labels " nhwc": those are the ones skipped
    spilled = {(wide.stem, conv_tiles.label(cands[0][0]))}
    rest = conv_tiles.sources(wide, limit=2, skip=spilled, layout="nhwc")[1]
    assert [conv_tiles.label(c) for c, _ in rest] == [conv_tiles.label(cands[1][0]),
                                                      conv_tiles.label(conv_tiles.sources(wide, limit=3, layout="nhwc")[1][2][0])]


MATMUL_PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)

def get_inputs():
    return [torch.randn(37, 19), torch.randn(19, 45)]

def get_init_inputs():
    return []
'''


def test_matmul_sweep_writes_each_tile_into_the_matmul_launch(tmp_path: Path) -> None:
    kb = tmp_path / "level1"
    kb.mkdir()
    path = kb / "9_Matmul_odd.py"
    path.write_text(textwrap.dedent(MATMUL_PROBLEM))
    cfgs = conv_tiles.grid_mm()
    assert len({conv_tiles.label(c) for c in cfgs}) == len(cfgs)
    assert all(c["BLOCK_M"] * c["BLOCK_N"] <= 256 * 128 for c in cfgs)
    _, cands = conv_tiles.sources(path, limit=4, kind="matmul")
    assert [c for c, _ in cands] == cfgs[:4]
    for cfg, src in cands:
        launch = next(line for line in src.splitlines() if "_matmul_0_kernel[" in line)
        assert f"BLOCK_M={cfg['BLOCK_M']}" in launch and f"BLOCK_K={cfg['BLOCK_K']}" in launch
        assert f"num_stages={cfg['num_stages']}" in launch and "PRECISION='tf32x3'" in launch


def test_a_prior_sweep_orders_the_configurations_best_known_first(tmp_path: Path) -> None:
    """--prior: configurations ranked by their geometric-mean distance from each problem's fastest in an earlier
    sweep; ones it never timed keep grid order after them; --limit then keeps the best-known N."""
    rows = [{"problem": "a", "config": "A", "status": "correct", "ms": 1.0},
            {"problem": "a", "config": "B", "status": "correct", "ms": 2.0},
            {"problem": "b", "config": "A", "status": "correct", "ms": 4.0},
            {"problem": "b", "config": "B", "status": "correct", "ms": 2.0},
            {"problem": "b", "config": "C", "status": "correct", "ms": 3.0},
            {"problem": "b", "config": "D", "status": "failed"}]
    prior = conv_tiles.prior_order(rows)
    assert set(prior) == {"A", "B", "C"}
    assert abs(prior["A"] - 2 ** 0.5) < 1e-9 and abs(prior["B"] - 2 ** 0.5) < 1e-9 and prior["C"] == 1.5
    kb = tmp_path / "level1"
    kb.mkdir()
    path = kb / "9_Matmul_odd.py"
    path.write_text(textwrap.dedent(MATMUL_PROBLEM))
    grid = conv_tiles.grid_mm()
    fav = {conv_tiles.label(grid[5]): 1.0, conv_tiles.label(grid[2]): 1.3}
    _, cands = conv_tiles.sources(path, limit=3, kind="matmul", prior=fav)
    assert [c for c, _ in cands] == [grid[5], grid[2], grid[0]]
