"""The conv-vs-cuDNN table reads suite records; it measures nothing itself."""

from __future__ import annotations

import json
from pathlib import Path

from _scripts import load_script


def _row(key: str, status: str, cand: float, eager: float, comp: float) -> dict:
    level, problem = key.split("/")
    bench = {k: {"median_ms": v} for k, v in (("candidate", cand), ("eager", eager), ("compiled", comp))}
    return {"key": key, "problem": problem, "level": int(level[-1]), "status": status, "version": "v",
            "result": {"benchmark": bench} if status == "correct" else None}


def test_later_rows_replace_earlier_ones_and_the_kernel_says_where_its_convolution_runs(tmp_path: Path) -> None:
    mod = load_script("conv_vs_cudnn_table")
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("\n".join(json.dumps(r) for r in (
        _row("level1/63_conv_standard_2D", "crashed", 0, 0, 0), _row("level1/5_Matrix_scalar", "correct", 1, 1, 1),
        _row("level1/50_conv_standard_2D", "correct", 4.0, 2.0, 1.6))) + "\n")
    second.write_text(json.dumps(_row("level1/63_conv_standard_2D", "correct", 2.0, 3.0, 5.0)) + "\n")
    kernels = tmp_path / "kernels" / "level1"
    kernels.mkdir(parents=True)
    (kernels / "63_conv_standard_2D.py").write_text("t = _conv_0(x, self.conv.weight)\n")
    (kernels / "50_conv_standard_2D.py").write_text("t = F.conv2d(x, self.conv.weight, None)\n")
    lines = mod.table(mod.load([first, second]), [tmp_path / "kernels"])
    body = [line for line in lines if line.startswith("| 50_") or line.startswith("| 63_")]
    assert len(body) == 2 and "Matrix_scalar" not in "\n".join(lines)  # only convolution problems
    assert body[0].split(" | ")[2] == "torch" and "0.50x | 0.40x" in body[0]
    assert body[1].split(" | ")[2] == "Triton" and "1.50x | 2.50x" in body[1]
    assert lines[-1].startswith("\n2 verified; geomean 0.87x cuDNN, 1.00x torch.compile; 1 at least as fast")
