"""Markdown (GitHub tables): for terminals, READMEs and pull requests."""

from __future__ import annotations

from tabulate import tabulate

from debias_bench.reporting.format import markdown_text, note_sections, number, ratio_text
from debias_bench.reporting.model import Cell, Column, Table


def cell_text(cell: Cell) -> str:
    if not cell.has_value:
        return f"– ({cell.missing})" if cell.missing else "–"
    assert cell.mean is not None
    text = number(cell.mean, cell.digits, cell.signed)
    if cell.bold:
        text = f"**{text}**"
    if cell.std is not None:
        text += f" ± {number(cell.std, cell.digits)}"
    if cell.low is not None and cell.high is not None:
        text += f" [{number(cell.low, cell.digits)}, {number(cell.high, cell.digits)}]"
    if cell.ratio is not None:
        text += f" ({ratio_text(cell)})"
    if cell.delta is not None:
        text += f" ({number(cell.delta, cell.digits, signed=True)})"
    if cell.show_n:
        text += f" (n={cell.n})"
    if cell.flag:
        text += " †"
    if cell.tie:
        text += " ≈"
    return text


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
