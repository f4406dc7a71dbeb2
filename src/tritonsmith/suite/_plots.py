"""PNG plots of a timed suite run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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
    ax.set_xscale("log")
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

    # powers of two (and 1.5x) labelled; minor ticks unlabelled so the labels never overlap
    ticks = [t for t in (1 / 8, 1 / 4, 1 / 2, 1, 1.5, 2, 4, 8, 16, 32, 64) if bins[0] <= t <= bins[-1]]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("speedup (reference time / kernel time)")
    ax.set_ylabel("problems")
    ax.set_title("Speedup of correct kernels")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_fast_p(records: Sequence[ProblemRecord], problems: int, path: Path) -> Path:
    """fast_p (share of all problems correct and faster than p x) as p sweeps 0..max speedup."""
    import numpy as np

    plt = _pyplot()
    data = _speedups(records)
    top = max([v for vs in data.values() for v in vs] + [2.5])
    ps = np.linspace(0.0, top * 1.05, 400)
    fig, ax = plt.subplots(figsize=(7, 4))
    for base, vs in data.items():
        arr = np.asarray(vs)
        ax.plot(ps, [(arr > p).sum() / problems for p in ps], color=_COLOURS[base], label=_LABELS[base])
    for p in (1.0, 1.5, 2.0):
        ax.axvline(p, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("speedup threshold p")
    ax.set_ylabel("fast_p (share of all problems)")
    ax.set_ylim(0, 1)
    ax.set_title(f"fast_p over {problems} problems")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
