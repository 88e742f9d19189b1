"""Accuracy against bias-conflicting ratio, one figure per dataset (PNG and PDF), and the
critical-difference diagram of a table's ranks (``--interval``).

Figures are drawn on matplotlib's Agg canvas without pyplot, so nothing here needs a display
or changes the caller's backend.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from debias_bench.reporting.figures import save_png_pdf
from debias_bench.reporting.grouping import check_cells
from debias_bench.reporting.layout import (
    ACCURACY,
    OTHER,
    dataset_name,
    method_name,
    method_order,
    reference_layout,
)
from debias_bench.reporting.model import Table
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.ranks import RankTest, rank_shortfall
from debias_bench.reporting.runs import finished
from debias_bench.reporting.stats import seed_stats

FORMATS = ("png", "pdf")


def ratio_curves(records: pd.DataFrame, opts: ReportOptions) -> pd.DataFrame:
    """mean, std, n of the metric per (protocol, preset, dataset, method, ratio)."""
    done = finished(records, opts).copy()
    done["protocol"] = done["protocol"].fillna("?")
    done["preset"] = done["preset"].fillna("?")
    keys = ["protocol", "preset", "dataset", "method", "ratio"]
    check_cells(done, keys)
    rows = []
    for key, group in done.groupby(keys):
        mean, std, n = seed_stats(group[opts.metric])
        rows.append({**dict(zip(keys, key, strict=True)), "mean": mean, "std": std, "n": n})
    return pd.DataFrame(rows, columns=[*keys, "mean", "std", "n"])


def _figure(
    curves: pd.DataFrame, title: str, ylabel: str, paper: dict[str, list[tuple[float, float]]]
) -> Figure:
    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ratios = sorted(curves["ratio"].unique())
    for method in method_order(curves["method"].unique().tolist()):
        rows = curves[curves["method"] == method].sort_values("ratio")
        line = ax.errorbar(
            rows["ratio"],
            rows["mean"],
            yerr=rows["std"].fillna(0.0),
            marker="o",
            capsize=3,
            label=method_name(method),
        )
        points = sorted(paper.get(method, []))
        if points:
            ratios = sorted({*ratios, *(r for r, _ in points)})
            ax.plot(
                [r for r, _ in points],
                [m for _, m in points],
                linestyle="--",
                linewidth=1,
                color=line.lines[0].get_color(),
                label=f"{method_name(method)} (paper)",
            )
    ax.set_xscale("log")
    ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
    ax.minorticks_off()
    ax.set_xlabel("bias-conflicting samples in training (%)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return fig


def ratio_figures(
    records: pd.DataFrame, opts: ReportOptions, paper: PaperNumbers | None = None
) -> Iterator[tuple[str, Figure]]:
    """(file stem, figure) per (dataset, protocol, preset): what the files and the HTML page
    show alike."""
    curves = ratio_curves(records, opts)
    ylabel = f"{opts.split} {opts.metric.replace('_', ' ')} (%)"
    for (protocol, preset, dataset), block in curves.groupby(["protocol", "preset", "dataset"]):
        reference: dict[str, list[tuple[float, float]]] = {}
        if paper is not None and opts.metric == "accuracy":
            for (d, ratio, method), (mean, _) in paper.accuracy.items():
                if d == dataset and method in set(block["method"]):
                    reference.setdefault(method, []).append((ratio, mean))
        title = (
            f"{dataset_name(str(dataset))}: mean ± std over seeds\n"
            f"protocol {protocol}, preset {preset}, selection {opts.selection}"
        )
        stem = f"{dataset}_{protocol}_{preset}_{opts.metric}_{opts.selection}"
        yield stem, _figure(block, title, ylabel, reference)


def png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG, in memory (the HTML report embeds it as a data URI)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def plot_ratio_curves(
    records: pd.DataFrame,
    opts: ReportOptions,
    out_dir: Path,
    paper: PaperNumbers | None = None,
) -> list[Path]:
    """Write one PNG and one PDF per (dataset, protocol, preset); returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, fig in ratio_figures(records, opts, paper):
        for fmt in FORMATS:
            path = out_dir / f"{stem}.{fmt}"
            fig.savefig(path, dpi=150)
            written.append(path)
    return written


def rank_figure(ranks: RankTest, title: str) -> Figure:
    """The critical-difference diagram (Demsar 2006; ``scikit_posthocs``): each method at its
    average rank (1 = best, on the left), a bar joining the methods the Nemenyi test does not
    tell apart at the level, and the critical difference drawn to scale."""
    import scikit_posthocs as sp  # heavy (seaborn): only when a diagram is drawn

    fig = Figure(figsize=(6.4, 1.2 + 0.28 * len(ranks.methods)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    names = {m: method_name(m) for m in ranks.methods}
    p = pd.DataFrame(1.0, index=list(names.values()), columns=list(names.values()))
    for (a, b), value in ranks.nemenyi.items():
        p.loc[names[a], names[b]] = value
    sp.critical_difference_diagram(
        {names[m]: r for m, r in ranks.ranks.items()},
        p,
        alpha=ranks.alpha,
        ax=ax,
        label_fmt_left="{label} ({rank:.2f})",
        label_fmt_right="({rank:.2f}) {label}",
        label_props={"fontsize": 8},
    )
    k = len(ranks.methods)
    ax.set_xticks(range(1, k + 1))
    left, right = ax.get_xlim()
    ax.set_xlim(left, right + 0.4)  # room for the right-hand labels
    at = ax.get_xaxis_transform()  # x in ranks, y in axes fractions
    ax.plot([1, 1 + ranks.cd], [1.16, 1.16], color="tab:red", linewidth=2, clip_on=False,
            transform=at)  # fmt: skip
    ax.text(1 + ranks.cd / 2, 1.18, f"critical difference {ranks.cd:.2f}", ha="center",
            va="bottom", fontsize=8, color="tab:red", transform=at)  # fmt: skip
    fig.suptitle(
        f"{title}\naverage rank over {len(ranks.blocks)} cells (1 = best); Friedman "
        f"χ²({k - 1}) = {ranks.statistic:.2f}, p = {ranks.p:.3g}; bars: Nemenyi p ≥ "
        f"{ranks.alpha:g}",
        fontsize=8,
    )
    return fig


def rank_figures(tables: list[Table]) -> Iterator[tuple[str, Figure]]:
    """(file stem, diagram) per table with ranks (``bench report --interval``)."""
    for table in tables:
        if table.ranks is None:
            continue
        meta = table.meta
        keys = ("protocol", "preset", "metric", "selection")
        stem = "_".join(["ranks", table.name, *(meta.get(k, "?") for k in keys)])
        title = f"{table.title}: protocol {meta.get('protocol')}, preset {meta.get('preset')}"
        yield stem, rank_figure(table.ranks, title)


def plot_rank_diagrams(tables: list[Table], out_dir: Path) -> list[Path]:
    """Write each table's critical-difference diagram as PNG and PDF; returns the paths."""
    return [p for stem, fig in rank_figures(tables) for p in save_png_pdf(fig, out_dir / stem)]


def unranked(tables: list[Table]) -> list[str]:
    """Why each accuracy table without ranks has none (``--interval`` ranks them): too few
    cells, or too few methods with a number in every cell (:func:`rank_shortfall`)."""
    layout = reference_layout()
    accuracy = {t.id for t in layout.of_layout(ACCURACY)} | {OTHER.id}
    reasons = []
    for table in tables:
        if table.ranks is not None or table.name not in accuracy:
            continue
        ours = [row for row in table.rows if row.kind == "ours"]
        full = [
            c.key
            for c in table.columns
            if ours and all(_finite(row.cells[c.key].mean) for row in ours)
        ]
        why = rank_shortfall(len(ours), len(full))
        if why is not None:
            meta = table.meta
            where = f"protocol {meta.get('protocol')}, preset {meta.get('preset')}"
            reasons.append(f"{table.name} ({where}) has {why}")
    return reasons


def write_plots(
    records: pd.DataFrame,
    tables: list[Table],
    opts: ReportOptions,
    out_dir: Path,
    paper: PaperNumbers | None = None,
) -> tuple[list[Path], str]:
    """``bench report --plot``: the accuracy-against-ratio plots, and with ``--interval`` each
    accuracy table's critical-difference diagram; the files, and one line saying what was
    written and why a diagram or plot was not (a ``note:`` then)."""
    curves = plot_ratio_curves(records, opts, out_dir, paper)
    diagrams = plot_rank_diagrams(tables, out_dir) if opts.interval is not None else []
    written = [*curves, *diagrams]
    kinds = [
        _count(len(files) // len(FORMATS), what)
        for files, what in (
            (curves, "accuracy-against-ratio plot"),
            (diagrams, "critical-difference diagram"),
        )
        if files
    ]
    line = f"wrote {len(written)} plot files under {out_dir}"
    line += f" ({', '.join(kinds)}; PNG and PDF)" if kinds else ""
    missing = []
    if not curves:
        missing.append("no accuracy-against-ratio plot: no finished runs to plot")
    if opts.interval is not None:
        missing += [f"no critical-difference diagram: {why}" for why in unranked(tables)]
    if missing:
        line = f"note: {line}; " + "; ".join(missing)
    return written, line


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def plot_reproduction(cells: list[Any], title: str, path: Path) -> Path:
    """Ours against the paper, accuracy against ratio, one panel per method, both with their
    std over seeds as error bars (``cells``: ``reproduction.compare.Comparison``)."""
    methods = list(dict.fromkeys(c.method for c in cells))
    cols = min(4, len(methods)) or 1
    rows = -(-len(methods) // cols) or 1
    fig = Figure(figsize=(3.2 * cols, 2.7 * rows + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    ratios = sorted({c.ratio for c in cells})
    for ax, method in zip(axes.flat, methods, strict=False):
        mine = sorted((c for c in cells if c.method == method), key=lambda c: c.ratio)
        for label, mean, std, style in (
            ("ours", "ours_mean", "ours_std", {"marker": "o", "linestyle": "-"}),
            ("paper", "paper_mean", "paper_std", {"marker": "s", "linestyle": "--"}),
        ):
            points = [c for c in mine if getattr(c, mean) is not None]
            ax.errorbar(
                [c.ratio for c in points],
                [getattr(c, mean) for c in points],
                yerr=[getattr(c, std) or 0.0 for c in points],
                capsize=3,
                label=label,
                **style,
            )
        ax.set_xscale("log")
        ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
        ax.minorticks_off()
        ax.set_title(method_name(method), fontsize=9)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(methods) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    fig.supxlabel("bias-conflicting samples in training (%)", fontsize=9)
    fig.supylabel("test accuracy (%)", fontsize=9)
    fig.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
