"""Compatibility names: the reporter lives in :mod:`debias_bench.reporting`."""

from __future__ import annotations

import pandas as pd

from debias_bench.reporting import ReportOptions, build_tables, render
from debias_bench.reporting.layout import PAPER_ORDER, method_name, method_order
from debias_bench.reporting.records import METRICS, RUN_COLUMNS, load_records

display_name = method_name


def markdown_table(
    df: pd.DataFrame, selection: str = "last", metric: str = "accuracy", split: str = "test"
) -> str:
    """The accuracy tables (synthetic, real-world, other datasets) as Markdown."""
    opts = ReportOptions(selection=selection, metric=metric, split=split)
    tables = [t for name in ("synthetic", "real", "other") for t in build_tables(df, name, opts)]
    return render(tables, "markdown")


__all__ = [
    "METRICS",
    "PAPER_ORDER",
    "RUN_COLUMNS",
    "display_name",
    "load_records",
    "markdown_table",
    "method_order",
]
