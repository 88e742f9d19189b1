"""The ``subpop`` table: the metrics subpopulation-shift benchmarks report (SubpopBench,
WILDS), per dataset, ratio and method: average, worst-group, bias-aligned and bias-conflicting
accuracy under the model selection used, each a mean +- std over seeds.

Worst-group accuracy is the lowest accuracy over the (class x bias) groups present in the
split; under the table, each row's group that was worst most often, by the class and bias
names its dataset declares. A table holding a dataset whose family declares the weights of an
adjusted average (``adjusted_weights``: Waterbirds) has an ``adjusted avg.`` column last: the
split's group accuracies weighted by the training split's group sizes, the average Sagawa et
al. and DFR report on Waterbirds (``debias_bench.config.selection.adjusted_average``,
computed from each run's recorded group accuracies by
:func:`debias_bench.reporting.records.adjusted_average_of`); the other datasets' rows show a
dash there. With ``--compare-paper``, a ``paper`` and a ``diff`` row follow each row the
reference has a number for: its test accuracy, worst-group accuracy and adjusted average
(``results/reference/subpop_waterbirds_celeba.yaml``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from debias_bench.reporting.compare import paper_rows, paper_subpop_row
from debias_bench.reporting.layout import (
    bias_marker,
    dataset_name,
    dataset_order,
    dataset_spec,
    method_name,
    method_order,
)
from debias_bench.reporting.model import Cell, Column, Row, Table
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.records import adjusted_weights
from debias_bench.reporting.runs import checked_blocks, finished, run_table, unfinished_notes
from debias_bench.reporting.stats import STATISTIC, seed_stats, value_cell

#: the table's columns: record column -> header
SUBPOP_METRICS = {
    "accuracy": "average",
    "worst_group_accuracy": "worst-group",
    "aligned_accuracy": "aligned",
    "conflicting_accuracy": "conflicting",
}
#: the column of the datasets whose family declares an adjusted average (Waterbirds), last so
#: that the other columns keep their places in a table with and without it
ADJUSTED = "adjusted_average"
ADJUSTED_LABEL = "adjusted avg."


def subpop_tables(
    records: pd.DataFrame, opts: ReportOptions, paper: PaperNumbers | None = None
) -> list[Table]:
    """One table per (protocol, preset): rows dataset x ratio x method, columns
    :data:`SUBPOP_METRICS`, and :data:`ADJUSTED` where one of its datasets has an adjusted
    average (a dash in the rows of the others); with ``paper``, its row and the difference
    under each of ours it has a number for."""
    runs, done = run_table(records), finished(records, opts)
    keys = ["dataset", "ratio", "method"]
    tables = []
    for protocol, preset, block in checked_blocks(runs, keys):
        bdone = done[done["run_id"].isin(block["run_id"])]
        datasets = dataset_order(block["dataset"].unique().tolist())
        adjusted = {d for d in datasets if adjusted_weights(d)}
        metrics = [*SUBPOP_METRICS, *([ADJUSTED] if adjusted else [])]
        rows, worst_notes, max_n = [], [], 0
        for dataset in datasets:
            of_dataset = block[block["dataset"] == dataset]
            for ratio in sorted(of_dataset["ratio"].unique()):
                of_cell = of_dataset[of_dataset["ratio"] == ratio]
                for method in method_order(of_cell["method"].unique().tolist()):
                    ids = of_cell.loc[of_cell["method"] == method, "run_id"]
                    cell_done = bdone[bdone["run_id"].isin(ids)]
                    states = list(of_cell.loc[of_cell["method"] == method, "state"])
                    n_seeds = int(of_cell.loc[of_cell["method"] == method, "seed"].nunique())
                    cells = {
                        key: value_cell(list(cell_done[key]), states, n_seeds, opts.digits)
                        if key != ADJUSTED or dataset in adjusted
                        else Cell(digits=opts.digits)  # a dash: not defined on this dataset
                        for key in metrics
                    }
                    max_n = max(max_n, seed_stats(cell_done["accuracy"])[2])
                    labels = (dataset, f"{ratio:.1f}", _method_label(method))
                    row = Row((*labels, "ours") if paper else labels, cells, "ours", dataset)
                    rows.append(row)
                    if paper is not None:
                        theirs = paper_subpop_row(
                            paper, dataset, float(ratio), method, metrics, opts
                        )
                        rows += paper_rows(labels, dataset, row, theirs)
                    common = _most_common_worst(cell_done["worst_group"], dataset)
                    if common:
                        worst_notes.append(f"{dataset} {ratio:g} % {method_name(method)}: {common}")
        what = (
            f"{opts.split.capitalize()} accuracy (%) on the whole split (average), on its "
            "worst (class x bias) group, and on its bias-aligned and bias-conflicting samples."
        )
        if adjusted:
            what += " " + _adjusted_caption(opts.split)
        caption = (
            f"{what} Protocol `{protocol}`, preset `{preset}`, model selection "
            f"`{opts.selection}`. Cells: {STATISTIC}; n = {max_n} seed"
            f"{'' if max_n == 1 else 's'} unless a cell shows its own n. (*) and (◇): methods "
            "trained with and without bias labels."
        )
        if paper is not None:
            caption += " " + _paper_caption(paper, bool(adjusted))
        tables.append(
            Table(
                name="subpop",
                title="Average, worst-group, aligned and conflicting accuracy",
                caption=caption,
                row_headers=("dataset", "ratio %", "method", *(("source",) if paper else ())),
                columns=[
                    Column(k, label)
                    for k, label in [*SUBPOP_METRICS.items(), (ADJUSTED, ADJUSTED_LABEL)]
                    if k in metrics
                ],
                rows=rows,
                notes=unfinished_notes(block),
                remarks=worst_notes,
                remarks_title="Worst group of each row (the one most often worst over its seeds)",
                display={d: dataset_name(d) for d in block["dataset"].unique()},
                meta={
                    "protocol": protocol,
                    "preset": preset,
                    "selection": opts.selection,
                    "split": opts.split,
                },
            )
        )
    return tables


def _adjusted_caption(split: str) -> str:
    """What the adjusted-average column is."""
    return (
        f"{ADJUSTED_LABEL.capitalize()} (adjusted average): the {split} accuracy of each "
        "(class x bias) group weighted by that group's share of the training split, as the "
        "dataset's family declares it (Waterbirds: the release's training groups), the average "
        "Sagawa et al. and DFR report on Waterbirds, whose test split is balanced; a dash on "
        "datasets that define none."
    )


def _paper_caption(paper: PaperNumbers, adjusted: bool) -> str:
    """What the ``paper`` and ``diff`` rows are (``adjusted``: the table has the
    adjusted-average column)."""
    where = (
        f"compared in the {ADJUSTED_LABEL} column, never in the average one"
        if adjusted
        else "compared only by a table with the adjusted-average column"
    )
    return (
        f"Rows `paper`: {paper.short_source()}, test accuracy (average), worst-group accuracy "
        f"and adjusted average ({paper.statistic}; produced with the `{paper.protocol}` code "
        "paths; an empty cell: no comparable number, e.g. Waterbirds' published average, which "
        f"is the adjusted one, {where}); "
        "rows `diff`: ours - paper, † where |diff| exceeds the combined std "
        "sqrt(std_ours² + std_paper²) (std_ours = 0 for a single seed)."
    )


def _method_label(method: str) -> str:
    marker = bias_marker(method)
    return f"{method_name(method)}{marker or ''}"


def _group_name(dataset: str, cls: int, bias: int) -> str:
    """``class dog, bias colour7``: the names the dataset declares (``class_names``,
    ``bias_names``), else the indices (``class 3, bias 7``)."""
    spec = dataset_spec(dataset)
    classes = tuple(getattr(spec, "class_names", ()) or ())
    biases = tuple(getattr(spec, "bias_names", ()) or ())
    class_text = classes[cls] if 0 <= cls < len(classes) else str(cls)
    bias_text = biases[bias] if 0 <= bias < len(biases) else str(bias)
    return f"class {class_text}, bias {bias_text}"


def _most_common_worst(groups: Any, dataset: str) -> str | None:
    """``class dog, bias colour7 (2 of 3 seeds)``: the group most often worst over the seeds."""
    found = Counter(tuple(g) for g in groups if isinstance(g, list | tuple) and len(g) == 2)
    if not found:
        return None
    (c, b), count = found.most_common(1)[0]
    return f"{_group_name(dataset, int(c), int(b))} ({count} of {sum(found.values())} seeds)"
