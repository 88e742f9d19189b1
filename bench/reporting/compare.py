"""The paper's numbers beside ours (``--compare-paper``): its row and the difference row.

The paper's cells are bold and bracketed among all the paper's methods, as printed in the
paper, whichever of them a table shows (the ``subpop`` table's are plain: one method a row).
"""

from __future__ import annotations

from debias_bench.reporting.model import Cell, Row
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers, Stat
from debias_bench.reporting.stats import diff_cell, mark_best


def _paper_cell(stat: Stat, digits: int) -> Cell:
    return Cell(mean=stat[0], std=stat[1], digits=digits)


def paper_rows(
    labels: tuple[str, ...], group: str, ours: Row, paper_cells: dict[str, Cell]
) -> list[Row]:
    """The paper's row and the difference row under one of our rows (none without numbers)."""
    if not any(c.has_value for c in paper_cells.values()):
        return []
    diffs = {key: diff_cell(ours.cells[key], cell) for key, cell in paper_cells.items()}
    return [
        Row((*labels, "paper"), paper_cells, "paper", group),
        Row((*labels, "diff"), diffs, "diff", group),
    ]


def paper_accuracy_row(
    paper: PaperNumbers, dataset: str, ratio: float, methods: list[str], opts: ReportOptions
) -> dict[str, Cell]:
    """The paper's cells of one (dataset, ratio) row of an accuracy table."""
    full = {
        m: _paper_cell(stat, opts.digits)
        for (d, r, m), stat in paper.accuracy.items()
        if d == dataset and r == ratio
    }
    mark_best(full, opts.ours)
    return {m: full.get(m, Cell(missing="")) for m in methods}


def paper_per_class(
    paper: PaperNumbers, dataset: str, ratio: float, keys: list[str], opts: ReportOptions
) -> dict[str, dict[str, Cell]]:
    """method -> column -> the paper's cell of a class-wise table, bold per column."""
    grid: dict[str, dict[str, Cell]] = {}
    for key in keys:
        full = {
            m: _paper_cell(stat, opts.digits)
            for (d, r, m, c), stat in paper.per_class.items()
            if d == dataset and r == ratio and c == key
        }
        mark_best(full, opts.ours, gain=key == "average")
        for m, cell in full.items():
            grid.setdefault(m, {})[key] = cell
    return grid


#: the ``subpop`` table's columns -> the reference's cells they are compared with (its adjusted
#: average, Waterbirds' published "average", with ours: never with our test accuracy)
SUBPOP_PAPER_METRICS = {
    "accuracy": "accuracy",
    "worst_group_accuracy": "worst_group",
    "adjusted_average": "adjusted_average",
}


def paper_subpop_row(
    paper: PaperNumbers,
    dataset: str,
    ratio: float,
    method: str,
    columns: list[str],
    opts: ReportOptions,
) -> dict[str, Cell]:
    """The paper's cells of one ``subpop`` row: its test accuracy (average), worst-group
    accuracy and adjusted average; the columns it has no number for are left empty
    (Waterbirds' published average is the adjusted one, which the reference keeps apart: it
    fills the adjusted-average column, never the average)."""
    cells = {}
    for column in columns:
        metric = SUBPOP_PAPER_METRICS.get(column)
        stat = paper.cells()[metric].get((dataset, ratio, method)) if metric else None
        cells[column] = Cell(missing="") if stat is None else _paper_cell(stat, opts.digits)
    return cells
