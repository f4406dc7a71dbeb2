"""PNG plots of a timed suite run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tritonsmith.suite.results import ProblemRecord

_COLOURS = {"eager": "#1f77b4", "compile": "#d62728"}
_LABELS = {"eager": "vs eager", "compile": "vs torch.compile"}


def _pyplot():  # noqa: ANN202 - matplotlib.pyplot, imported late (it is slow)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _speedups(records: Sequence[ProblemRecord]) -> dict[str, list[float]]:
    return {"eager": [s for r in records if (s := r.speedup_vs_eager) is not None],
            "compile": [s for r in records if (s := r.speedup_vs_compile) is not None]}


def plot_speedups(records: Sequence[ProblemRecord], path: Path) -> Path:
    """Histogram of per-problem speedups (log scale) against both baselines, 1x marked."""
    import numpy as np

    plt = _pyplot()
    data = _speedups(records)
    values = [v for vs in data.values() for v in vs]
    lo, hi = min(values + [0.5]), max(values + [2.0])
    bins = np.geomspace(lo / 1.05, hi * 1.05, 25)
    fig, ax = plt.subplots(figsize=(7, 4))
    for base, vs in data.items():
        if vs:
            ax.hist(vs, bins=bins, alpha=0.55, color=_COLOURS[base], label=f"{_LABELS[base]} (n={len(vs)})")
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    _times_axis(ax, bins[0], bins[-1])
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("speedup (reference time / kernel time)")
    ax.set_ylabel("problems")
    ax.set_title("Speedup of correct kernels")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _times_axis(ax: Any, lo: float, hi: float) -> None:
    """Log-scale speedup axis: powers of two (and 1.5x) labelled, minor ticks unlabelled (no overlaps)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ticks = [t for t in (1 / 8, 1 / 4, 1 / 2, 1, 1.5, 2, 4, 8, 16, 32, 64, 128) if lo <= t <= hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_fast_p(records: Sequence[ProblemRecord], problems: int, path: Path) -> Path:
    """fast_p (share of all problems correct and faster than p x) as p sweeps a log axis up to the largest
    speedup; left of the slowest correct kernel the curve is fast_0, the share correct."""
    import numpy as np

    plt = _pyplot()
    data = _speedups(records)
    values = [v for vs in data.values() for v in vs]
    lo, hi = min(values + [0.5]) / 1.1, max(values + [2.5]) * 1.1
    ps = np.geomspace(lo, hi, 400)
    fig, ax = plt.subplots(figsize=(7, 4))
    for base, vs in data.items():
        arr = np.asarray(vs)
        ax.plot(ps, [(arr > p).sum() / problems for p in ps], color=_COLOURS[base], label=_LABELS[base])
    for p in (1.0, 1.5, 2.0):
        ax.axvline(p, color="grey", linestyle=":", linewidth=1)
    _times_axis(ax, lo, hi)
    ax.set_xlabel("speedup threshold p (log scale)")
    ax.set_ylabel("fast_p (share of all problems)")
    ax.set_ylim(0, 1)
    ax.set_title(f"fast_p over {problems} problems")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
