"""CSV: one line per table cell (tidy), with every mark the other formats print as a column,
then one line per run the table leaves out (``kind`` :data:`NOT_IN_TABLE`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from debias_bench.reporting.model import Table

#: the ``kind`` of a line naming a run the table leaves out (``missing``: which and why)
NOT_IN_TABLE = "not in table"

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
                    "terms": column.terms,  # set where they differ from the table's reference
                    **{f: getattr(cell, f) for f in CELL_FIELDS},
                }
            )
    for note in table.notes:  # the runs it leaves out, as the other formats list them
        rows.append({"table": table.name, **table.meta, "kind": NOT_IN_TABLE, "missing": note})
    return rows


def render(tables: list[Table]) -> str:
    rows = [r for t in tables for r in cell_rows(t)]
    return pd.DataFrame(rows).to_csv(index=False)
