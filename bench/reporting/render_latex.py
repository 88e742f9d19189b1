"""LaTeX with booktabs: a document that compiles as is, or the table environments alone.

The document needs only ``booktabs`` (Debian: texlive-latex-recommended), ``graphicx`` and
``geometry`` (texlive-latex-base). Cells use three small macros, defined with
``\\providecommand`` inside each table so a pasted fragment keeps working:
``\\dbstd{0.28}`` (the std), ``\\dbgain{+1.10}`` (the bracket), ``\\dbn{2}`` (the seed count),
``\\dbci{77.15}{87.19}`` (the interval of the mean) and ``\\dbtie`` (not distinguishable from
the row's best).
"""

from __future__ import annotations

import re

from debias_bench.reporting.format import decorate, note_sections, number
from debias_bench.reporting.model import Cell, Column, Table

PREAMBLE = r"""\documentclass[10pt]{article}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage[landscape,margin=1.5cm]{geometry}
\usepackage{booktabs}
\usepackage{graphicx}
\begin{document}
"""
MACROS = r"""\providecommand{\dbstd}[1]{{\scriptsize$\pm$#1}}
\providecommand{\dbgain}[1]{{\footnotesize\textbf{(#1)}}}
\providecommand{\dbn}[1]{{\scriptsize\,(n=#1)}}
\providecommand{\dbmiss}[1]{{\scriptsize #1}}
"""
#: the macros of ``--interval``'s marks, defined only in the tables that use them
STATS_MACROS = r"""\providecommand{\dbci}[2]{{\scriptsize\,[#1, #2]}}
\providecommand{\dbtie}{$^{\approx}$}
"""
#: tables wider than this many value columns are scaled to the line width
RESIZE_ABOVE = 5

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "†": r"$^{\dagger}$",
    "◇": r"$^{\diamond}$",
    "²": r"$^{2}$",
    "×": r"$\times$",
    "–": "--",
    "−": r"$-$",
    "≈": r"$\approx$",
    "‡": r"$^{\ddagger}$",
    "≥": r"$\geq$",
    "α": r"$\alpha$",
    "χ": r"$\chi$",
    "·": r"$\cdot$",
    "√": r"$\surd$",
}


def escape(text: str) -> str:
    """Plain text to LaTeX; `code` becomes \\texttt, (*) the paper's superscript marker."""
    out = []
    for part in re.split(r"(`[^`]*`)", text):
        code = part.startswith("`") and part.endswith("`") and len(part) > 1
        body = "".join(_SPECIAL.get(ch, ch) for ch in (part[1:-1] if code else part))
        out.append(rf"\texttt{{{body}}}" if code else body)
    return "".join(out).replace("(*)", r"($^{\ast}$)")


def _signed(value: float, digits: int) -> str:
    return number(value, digits, signed=True).replace("-", "$-$")


#: how LaTeX prints each mark of a cell (:func:`~debias_bench.reporting.format.cell_marks`;
#: the macros are the preamble's)
MARKS = {
    "std": r"\dbstd{{{0}}}",
    "interval": r"\dbci{{{0}}}{{{1}}}",
    "ratio": r" \dbmiss{{({0})}}",
    "gain": r" \dbgain{{{0}}}",
    "n": r"\dbn{{{0}}}",
    "flag": r"$^{{\dagger}}$",
    "tie": r"\dbtie{{}}",
}


def cell_tex(cell: Cell) -> str:
    if not cell.has_value:
        return "--" + (rf" \dbmiss{{({escape(cell.missing)})}}" if cell.missing else "")
    assert cell.mean is not None
    text = _signed(cell.mean, cell.digits) if cell.signed else number(cell.mean, cell.digits)
    if cell.bold:
        text = rf"\textbf{{{text}}}"
    return decorate(cell, MARKS, text, lambda arg: escape(arg).replace("-", "$-$"))


def header_tex(column: Column) -> str:
    label = escape(column.label)
    if column.marker == "*":
        label += r"$^{\ast}$"
    elif column.marker:
        label += escape(column.marker)
    return label + escape(column.terms_mark)


def _label_cells(table: Table, index: int) -> list[str]:
    """Row labels, each printed only where it changes (booktabs style, no multirow)."""
    row = table.rows[index]
    previous = table.rows[index - 1].labels if index else None
    cells = []
    for k, label in enumerate(row.labels):
        same = previous is not None and previous[: k + 1] == row.labels[: k + 1]
        last = k == len(row.labels) - 1
        cells.append("" if same and not last else escape(table.display.get(label, label)))
    return cells


def render_table(table: Table, label: str = "") -> str:
    n_labels = len(table.row_headers)
    spec = "l" * n_labels + "".join(
        r"@{\hspace{1.5em}}c" if c.key in table.separated else "c" for c in table.columns
    )
    macros = MACROS
    if any(c.low is not None or c.tie for row in table.rows for c in row.cells.values()):
        macros += STATS_MACROS
    lines = [r"\begin{table}[htbp]", r"\centering", macros.rstrip("\n")]
    lines.append(rf"\caption{{\textbf{{{escape(table.title)}.}} {escape(table.caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    resize = len(table.columns) > RESIZE_ABOVE
    if resize:
        lines.append(r"\resizebox{\linewidth}{!}{%")
    lines.append(rf"\begin{{tabular}}{{{spec}}}")
    lines.append(r"\toprule")
    headers = [escape(h) for h in table.row_headers] + [header_tex(c) for c in table.columns]
    lines.append(" & ".join(headers) + r" \\")
    lines.append(r"\midrule")
    for i, row in enumerate(table.rows):
        if i and row.group != table.rows[i - 1].group:
            lines.append(r"\midrule")
        cells = _label_cells(table, i) + [cell_tex(row.cells[c.key]) for c in table.columns]
        lines.append(" & ".join(cells) + r" \\")
    lines.append(r"\bottomrule")
    lines.append(r"\end{tabular}" + ("}" if resize else ""))
    for title, notes in note_sections(table):
        lines.append(r"\par\smallskip{\footnotesize\raggedright " + escape(title) + ": ")
        lines.append("; ".join(escape(n) for n in notes) + ".\\par}")
    lines.append(r"\end{table}")
    return "\n".join(lines)


def render(tables: list[Table], standalone: bool = True) -> str:
    body = "\n\n".join(render_table(t, f"tab:{t.name}-{i}") for i, t in enumerate(tables, start=1))
    if not tables:
        body = "No runs for this table yet."
    if not standalone:
        return "% needs \\usepackage{booktabs} and \\usepackage{graphicx}\n" + body + "\n"
    return PREAMBLE + body + "\n\\end{document}\n"
