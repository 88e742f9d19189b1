"""The reporter: run records in, the paper's tables out.

``load_records`` reads a run store into a tidy DataFrame; ``build_tables`` turns it into table
models (a pure function); ``render`` writes them as LaTeX, Markdown, CSV or HTML. The modules:
records (store -> DataFrame), paper (the paper's reference YAML and its numbers), layout (the
paper's tables, order, names and markers, from that YAML), options, runs (the records as the
builders read them), stats (seed statistics, bold, gains, ties), significance (intervals, paired
and Welch tests, Holm, power, ranks: ``--interval`` and ``bench compare``), captions, compare (the
paper's rows), the builders accuracy, classwise, cost, subpop and tuned, catalog (the registry of
tables), render_* and plots.
"""

from __future__ import annotations

import pandas as pd

from debias_bench.errors import ConfigError
from debias_bench.reporting import render_csv, render_html, render_latex, render_markdown
from debias_bench.reporting.catalog import ALL, TABLES, TableBuilder, register_table, table_names
from debias_bench.reporting.model import Cell, Column, Row, Table
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers, load_paper
from debias_bench.reporting.records import METRICS, load_records

FORMATS = ("latex", "markdown", "csv", "html")


def build_tables(
    records: pd.DataFrame,
    table: str = ALL,
    opts: ReportOptions | None = None,
    paper: PaperNumbers | None = None,
) -> list[Table]:
    """The table models of ``table`` (a name in :data:`TABLES`, or ``all``) from the records."""
    opts = opts or ReportOptions()
    names = table_names(table)
    if paper is not None and (opts.metric, opts.split) != ("accuracy", "test"):
        raise ConfigError(
            f"the paper publishes test accuracy; cannot compare {opts.split} {opts.metric}",
            hint="drop --metric/--split, or drop --compare-paper",
        )
    return [t for name in names for t in TABLES.get(name)(records, opts, paper)]


def render(tables: list[Table], fmt: str = "markdown", standalone: bool = True) -> str:
    if fmt == "latex":
        return render_latex.render(tables, standalone=standalone)
    if fmt == "csv":
        return render_csv.render(tables)
    if fmt == "markdown":
        return render_markdown.render(tables)
    if fmt == "html":
        return render_html.render(tables)
    raise ValueError(f"format must be one of {FORMATS}")


__all__ = [
    "ALL",
    "FORMATS",
    "METRICS",
    "TABLES",
    "Cell",
    "Column",
    "PaperNumbers",
    "ReportOptions",
    "Row",
    "Table",
    "TableBuilder",
    "build_tables",
    "load_paper",
    "load_records",
    "register_table",
    "render",
]
