"""The figure of a search (``bench analyze tune``): every trial's validation accuracy against
each tuned hyperparameter, from ``tuned.yaml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from debias_bench.analysis.tuning import TunedFile, search_space
from debias_bench.reporting.figures import save_png_pdf
from debias_bench.reporting.layout import dataset_name, method_name, method_order


def _axis_values(values: list[Any]) -> tuple[list[float], list[str] | None]:
    """x positions, and tick labels when the values are categories (else None)."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return [float(v) for v in values], None
    labels = sorted({str(v) for v in values})
    return [float(labels.index(str(v))) for v in values], labels


def _scale(ax: Any, method: str, dataset: str, key: str, xs: list[float]) -> None:
    """A log axis for a log-uniform key (symlog when the official value is 0)."""
    from matplotlib.ticker import NullFormatter

    dist: Any = search_space(method, dataset).get(key)  # a log-scaled Float/IntDistribution
    if not getattr(dist, "log", False):
        return
    if min(xs) > 0:
        ax.set_xscale("log")
        ax.set_xlim(min(dist.low, *xs) / 1.5, max(dist.high, *xs) * 1.5)  # the whole space
    else:
        ax.set_xscale("symlog", linthresh=dist.low)
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_tuning(tuned: TunedFile, output: Path) -> list[Path]:
    """Validation accuracy of every trial against each tuned hyperparameter, one row of panels
    per method, one colour per dataset x ratio; the official configuration as a square, the
    winner circled. Written as PNG and PDF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = method_order([c.method for c in tuned.cells])
    keys = {
        m: sorted({k for c in tuned.cells if c.method == m for k in c.hparams}) for m in methods
    }
    width = max(len(k) for k in keys.values())
    fig, axes = plt.subplots(
        len(methods), width, figsize=(3.6 * width, 3.0 * len(methods)), squeeze=False
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, method in enumerate(methods):
        cells = [c for c in tuned.cells if c.method == method]
        for col in range(width):
            ax = axes[row][col]
            if col >= len(keys[method]):
                ax.axis("off")
                continue
            key = keys[method][col]
            trials = [(c, t) for c in cells for t in c.trials if t["valid_accuracy"] is not None]
            xs, ticks = _axis_values([t["hparams"][key] for _, t in trials])
            for i, cell in enumerate(cells):
                colour = colours[i % len(colours)]
                label = f"{dataset_name(cell.dataset)} {cell.ratio:g}%"
                mine = [(x, t) for x, (c, t) in zip(xs, trials, strict=True) if c is cell]
                for x, t in mine:
                    marker = "s" if t["trial"] == 0 else "o"
                    ax.scatter(x, t["valid_accuracy"], color=colour, marker=marker, s=28)
                    if t["trial"] == cell.trial:
                        ax.scatter(
                            x, t["valid_accuracy"], s=160, facecolors="none", edgecolors=colour
                        )
                ax.scatter([], [], color=colour, label=label)
            if ticks is not None:
                ax.set_xticks(range(len(ticks)), ticks)
            elif xs:
                _scale(ax, method, cells[0].dataset, key, xs)
            ax.set_xlabel(key)
            if col == 0:
                ax.set_ylabel(f"{method_name(method)}\nvalid accuracy (%)")
        axes[row][0].legend(fontsize=7)
    fig.suptitle(
        f"bench tune: {tuned.num_trials} trials per cell, validation accuracy at the "
        f"`{tuned.selection}` checkpoint (square: official configuration; circled: chosen)",
        fontsize=10,
    )
    fig.tight_layout()
    return save_png_pdf(fig, output)
