"""The reporter: run records in, the paper's tables out.

``load_records`` reads a run store into a tidy DataFrame; ``build_tables`` turns it into table
models (a pure function); ``render`` writes them as LaTeX, Markdown, CSV or HTML. The modules:
records (store -> DataFrame), layout (the paper's order, names, markers), stats (seed statistics,
bold, gains), tables (the builders), paper (the published numbers), render_* and plots.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from debias_bench.errors import ConfigError
from debias_bench.reporting import render_csv, render_html, render_latex, render_markdown
from debias_bench.reporting.model import Cell, Column, Row, Table
from debias_bench.reporting.paper import PaperNumbers, load_paper
from debias_bench.reporting.records import METRICS, load_records
from debias_bench.reporting.subpop import subpop_tables
from debias_bench.reporting.tables import (
    ReportOptions,
    accuracy_tables,
    classwise_tables,
    cost_table,
)

#: table name -> its builder ``(records, opts, paper) -> tables``; ``all`` is every one of them
BUILDERS: dict[str, Callable[[pd.DataFrame, ReportOptions, PaperNumbers | None], list[Table]]] = {
    "synthetic": lambda r, o, p: accuracy_tables(r, "synthetic", o, p),
    "real": lambda r, o, p: accuracy_tables(r, "real", o, p),
    "other": lambda r, o, p: accuracy_tables(r, "other", o, p),
    "bar-classwise": classwise_tables,
    "cost": lambda r, o, p: cost_table(r),
    "subpop": lambda r, o, p: subpop_tables(r, o),
}
#: what ``all`` builds: the paper's tables and the cost (``subpop`` is asked for by name)
ALL = ("synthetic", "real", "other", "bar-classwise", "cost")
TABLES = (*BUILDERS, "all")
FORMATS = ("latex", "markdown", "csv", "html")


def build_tables(
    records: pd.DataFrame,
    table: str = "all",
    opts: ReportOptions | None = None,
    paper: PaperNumbers | None = None,
) -> list[Table]:
    """The table models of ``table`` (one of :data:`TABLES`) from the run records."""
    opts = opts or ReportOptions()
    if table not in TABLES:
        raise ConfigError(f"table must be one of {', '.join(TABLES)}")
    if paper is not None and (opts.metric, opts.split) != ("accuracy", "test"):
        raise ConfigError(
            f"the paper publishes test accuracy; cannot compare {opts.split} {opts.metric}",
            hint="drop --metric/--split, or drop --compare-paper",
        )
    wanted = ALL if table == "all" else (table,)
    return [t for name in wanted for t in BUILDERS[name](records, opts, paper)]


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
    "FORMATS",
    "METRICS",
    "TABLES",
    "Cell",
    "Column",
    "PaperNumbers",
    "ReportOptions",
    "Row",
    "Table",
    "build_tables",
    "load_paper",
    "load_records",
    "render",
]
