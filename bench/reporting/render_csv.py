"""CSV: one line per table cell (tidy), with every mark the other formats print as a column."""

from __future__ import annotations

from typing import Any

import pandas as pd

from debias_bench.reporting.model import Table

#: ``low``/``high``: the interval of the mean, ``tie``: not distinguishable from the row's best,
#: ``p``: that test's Holm-corrected p-value (``bench report --interval``; empty without)
CELL_FIELDS = (
    "mean", "std", "n", "missing", "bold", "delta", "flag", "ratio", "low", "high", "tie", "p"
)  # fmt: skip


def cell_rows(table: Table) -> list[dict[str, Any]]:
    rows = []
    for row in table.rows:
        labels = dict(zip(table.row_headers, row.labels, strict=True))
        for column in table.columns:
            cell = row.cells[column.key]
            rows.append(
                {
                    "table": table.name,
                    **table.meta,
                    **labels,
                    "kind": row.kind,
                    "column": column.key,
                    **{f: getattr(cell, f) for f in CELL_FIELDS},
                }
            )
    return rows


def render(tables: list[Table]) -> str:
    rows = [r for t in tables for r in cell_rows(t)]
    return pd.DataFrame(rows).to_csv(index=False)
