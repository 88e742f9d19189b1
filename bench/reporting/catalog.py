"""The report tables, a registry: ``bench report --table NAME`` builds the entry ``NAME``.

A builder is ``(records, opts, paper) -> list[Table]``: the tidy run records (one row per run,
selection and split; :mod:`debias_bench.reporting.records`), the report's options, and the
paper's numbers when ``--compare-paper`` asks for them (else None). ``--table all`` builds the
entries registered with ``in_all=True``, in registration order: the paper's accuracy tables (one
per table its reference declares), ``other``, the paper's per-class tables, ``cost``. ``subpop``
and plugin tables are built when asked for by name (or registered with ``in_all=True``). A plugin
module (``BENCH_PLUGINS``) adds its own::

    @register_table("seeds", display_name="finished seeds per method and dataset")
    def seeds_table(records, opts, paper): ...
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from debias_bench.registry import Registry
from debias_bench.reporting.accuracy import accuracy_tables
from debias_bench.reporting.classwise import classwise_tables
from debias_bench.reporting.cost import cost_table
from debias_bench.reporting.layout import (
    ACCURACY,
    OTHER,
    PER_CLASS,
    PaperLayout,
    TableLayout,
    reference_layout,
)
from debias_bench.reporting.model import Table
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.subpop import subpop_tables

TableBuilder = Callable[[pd.DataFrame, ReportOptions, PaperNumbers | None], list[Table]]

TABLES: Registry[TableBuilder] = Registry("table")
register_table = TABLES.register
#: ``--table all``: every table registered with ``in_all=True``
ALL = "all"


def _bound(
    render: Callable[[pd.DataFrame, TableLayout, ReportOptions, PaperNumbers | None], list[Table]],
    table: TableLayout,
) -> TableBuilder:
    """A builder that renders ``table``'s layout with ``render`` (accuracy or per-class)."""

    def build(
        records: pd.DataFrame, opts: ReportOptions, paper: PaperNumbers | None
    ) -> list[Table]:
        return render(records, table, opts, paper)

    return build


def _register_builtins(paper: PaperLayout) -> None:
    for table in paper.of_layout(ACCURACY):
        builder = _bound(accuracy_tables, table)
        register_table(table.id, display_name=table.heading(), in_all=True)(builder)
    register_table(
        OTHER.id, display_name="accuracy on the datasets outside the paper's tables", in_all=True
    )(_bound(accuracy_tables, OTHER))
    for table in paper.of_layout(PER_CLASS):
        on = ", ".join(paper.datasets[d] for d in table.datasets)
        described = table.heading(f" on {on}")
        builder = _bound(classwise_tables, table)
        register_table(table.id, display_name=described, in_all=True)(builder)

    @register_table(
        "cost",
        display_name="time and peak memory per run, relative to "
        + paper.methods.get(paper.baseline, paper.baseline),
        in_all=True,
    )
    def cost(records: pd.DataFrame, opts: ReportOptions, paper: PaperNumbers | None) -> list[Table]:
        return cost_table(records)

    @register_table("subpop", display_name="average, worst-group, aligned, conflicting accuracy")
    def subpop(
        records: pd.DataFrame, opts: ReportOptions, paper: PaperNumbers | None
    ) -> list[Table]:
        return subpop_tables(records, opts, paper)


_register_builtins(reference_layout())


def table_names(table: str) -> list[str]:
    """The registered tables ``table`` stands for (``all``: those registered ``in_all``)."""
    if table == ALL:
        return [entry.name for entry in TABLES if entry.meta.get("in_all")]
    TABLES.entry(table)  # an unknown name: the error lists the registered ones
    return [table]
