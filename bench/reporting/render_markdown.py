"""Markdown (GitHub tables): for terminals, READMEs and pull requests."""

from __future__ import annotations

from tabulate import tabulate

from debias_bench.reporting.format import decorate, markdown_text, note_sections, number
from debias_bench.reporting.model import Cell, Column, Table

#: how Markdown prints each mark of a cell (:func:`~debias_bench.reporting.format.cell_marks`)
MARKS = {
    "std": " ± {0}",
    "interval": " [{0}, {1}]",
    "ratio": " ({0})",
    "gain": " ({0})",
    "n": " (n={0})",
    "flag": " †",
    "tie": " ≈",
}


def cell_text(cell: Cell) -> str:
    if not cell.has_value:
        return f"– ({cell.missing})" if cell.missing else "–"
    assert cell.mean is not None
    text = number(cell.mean, cell.digits, cell.signed)
    return decorate(cell, MARKS, f"**{text}**" if cell.bold else text)


def header(column: Column) -> str:
    return column.label + (column.marker or "") + column.terms_mark


def render_table(table: Table) -> str:
    """The table with its caption and notes; every text is escaped (:func:`markdown_text`):
    display names, notes and errors come from plugins and the run store."""

    def cell(text: str) -> str:
        return markdown_text(text, in_table=True)

    rows = [
        [
            *map(cell, map(str, row.labels)),
            *(cell(cell_text(row.cells[c.key])) for c in table.columns),
        ]
        for row in table.rows
    ]
    headers = [*map(cell, table.row_headers), *(cell(header(c)) for c in table.columns)]
    body = tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
    parts = [f"**{markdown_text(table.title)}.** {markdown_text(table.caption)}", body]
    for title, lines in note_sections(table):
        parts.append(
            f"{markdown_text(title)}:\n" + "\n".join(f"- {markdown_text(n)}" for n in lines)
        )
    return "\n\n".join(parts)


def render(tables: list[Table]) -> str:
    if not tables:
        return "(no runs for this table yet)\n"
    return "\n\n".join(render_table(t) for t in tables) + "\n"
