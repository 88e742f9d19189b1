"""Accuracy tables: rows dataset x ratio, columns the methods (the paper's Tables 1 and 2).

Runs of different protocols or presets are never averaged together: each (protocol, preset)
gets its own table, and the caption says which. Within a table, a cell averages the seeds of one
configuration only (:func:`~debias_bench.reporting.grouping.check_cells` stops the report when a
cell's runs differ in anything but the seed, and names a ``--where`` filter).

With ``--interval`` (``opts.interval``) each cell carries the interval of its mean, the cells
that cannot be told from their row's best are marked (:func:`~debias_bench.reporting.stats.
mark_ties`), and the table its methods' average ranks with the Friedman and Nemenyi tests
(:func:`~debias_bench.reporting.significance.rank_test`).
"""

from __future__ import annotations

import pandas as pd

from debias_bench.reporting.captions import caption, note_on_test_sets, ratio_label
from debias_bench.reporting.compare import paper_accuracy_row, paper_rows
from debias_bench.reporting.layout import (
    TableLayout,
    bias_marker,
    dataset_name,
    dataset_order,
    method_name,
    method_order,
    table_of,
)
from debias_bench.reporting.model import Column, Row, Table
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.ranks import RankTest, rank_test
from debias_bench.reporting.runs import (
    SeedCells,
    block_meta,
    checked_blocks,
    finished,
    run_table,
    unfinished_notes,
)
from debias_bench.reporting.stats import TieTests, mark_best, mark_ties, samples_by, set_interval
from debias_bench.reporting.terms import marked_columns, terms_differences

KEYS = ["dataset", "ratio", "method"]


def accuracy_tables(
    records: pd.DataFrame,
    table: TableLayout,
    opts: ReportOptions,
    paper: PaperNumbers | None = None,
) -> list[Table]:
    """``table``'s datasets (those :func:`~debias_bench.reporting.layout.table_of` sends to it),
    one table per (protocol, preset)."""
    runs = run_table(records)
    runs = runs[runs["dataset"].map(table_of) == table.id]
    done = finished(records, opts)
    tables = []
    for protocol, preset, block in checked_blocks(runs, KEYS):
        rows, datasets, methods, max_n, ties, ranks = _rows(block, done, opts, paper)
        terms = terms_differences(block, protocol)
        metric = opts.metric.replace("_", " ")
        what = (
            f"{opts.split.capitalize()} {metric} (%) on "
            f"{', '.join(dataset_name(d) for d in datasets)}."
            + note_on_test_sets(datasets, opts.split)
        )
        tables.append(
            Table(
                name=table.id,
                title=table.heading(),
                caption=caption(
                    what, protocol, preset, opts, max_n, paper, table.label, ties, ranks, terms
                ),
                row_headers=("dataset", "ratio %", "source") if paper else ("dataset", "ratio %"),
                columns=marked_columns(
                    [Column(m, method_name(m), bias_marker(m)) for m in methods], terms
                ),
                rows=rows,
                notes=unfinished_notes(block),
                display={d: dataset_name(d) for d in datasets},
                meta=block_meta(protocol, preset, opts),
                ranks=ranks,
            )
        )
    return tables


def _rows(
    block: pd.DataFrame, done: pd.DataFrame, opts: ReportOptions, paper: PaperNumbers | None
) -> tuple[list[Row], list[str], list[str], int, TieTests | None, RankTest | None]:
    """(rows, datasets, methods, max n, ties, ranks) of one block: a row per (dataset, ratio),
    and under it the paper's row and the difference when comparing; ties and ranks with
    ``--interval``."""
    seeds = SeedCells.of(block, done, KEYS, opts)
    methods = method_order(block["method"].unique().tolist())
    datasets = dataset_order(block["dataset"].unique().tolist())
    rows, ours = [], []
    for dataset in datasets:
        for ratio in sorted(block.loc[block["dataset"] == dataset, "ratio"].unique()):
            cells = {m: seeds.cell((dataset, ratio, m)) for m in methods}
            mark_best(cells, opts.ours)
            labels = (dataset, ratio_label(ratio))
            row = Row((*labels, "ours") if paper else labels, cells, "ours", dataset)
            rows.append(row)
            ours.append(((dataset, float(ratio)), row))
            if paper is not None:
                shown = paper_accuracy_row(paper, dataset, float(ratio), methods, opts)
                rows += paper_rows(labels, dataset, row, shown)
    ties, ranks = _significance(ours, block, done, opts)
    return rows, datasets, methods, seeds.max_n, ties, ranks


def _significance(
    ours: list[tuple[tuple[str, float], Row]],
    block: pd.DataFrame,
    done: pd.DataFrame,
    opts: ReportOptions,
) -> tuple[TieTests | None, RankTest | None]:
    """With ``opts.interval``: the intervals and ties of our rows ((dataset, ratio), row), and
    the methods' ranks over them."""
    spec = opts.interval
    if spec is None:
        return None, None
    found = samples_by(done[done["run_id"].isin(block["run_id"])], KEYS, opts.metric)
    samples = []
    for key, row in ours:
        by_method = {m: found[(*key, m)] for m in row.cells if (*key, m) in found}
        for method, cell in row.cells.items():
            set_interval(cell, by_method.get(method), spec)
        samples.append(by_method)
    ties = mark_ties([row.cells for _, row in ours], samples, spec.alpha)
    grid = {
        f"{dataset} {ratio:g}": {m: c.mean for m, c in row.cells.items() if c.mean is not None}
        for (dataset, ratio), row in ours
    }
    return ties, rank_test(grid, spec.alpha)
