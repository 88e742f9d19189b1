"""Number formatting shared by the renderers, and Markdown's escaping of text."""

from __future__ import annotations

import re
from collections.abc import Callable

from debias_bench.reporting.model import Cell, Table
from debias_bench.runs.states import RunState

#: at most this many runs are listed under a table (the rest: ``bench status``)
MAX_LISTED = 40
_NOTE_ORDER = tuple(
    s.value
    for s in (
        RunState.CORRUPT,
        RunState.FAILED,
        RunState.SKIPPED,
        RunState.DEAD,
        RunState.INTERRUPTED,
        RunState.RUNNING,
        RunState.PENDING,
    )
)


def number(value: float, digits: int, signed: bool = False) -> str:
    text = f"{value:.{digits}f}"
    if float(text) == 0:
        return f"{0:.{digits}f}"  # never "-0.00"
    return f"{value:+.{digits}f}" if signed else text


#: the marks a cell may carry after its mean, in print order: (kind, arguments as text)
Mark = tuple[str, tuple[str, ...]]


def cell_marks(cell: Cell) -> list[Mark]:
    """What every format prints after a cell's mean, in this order, as plain text: the std,
    the interval (``--interval``), a cost ratio, the ``--ours`` gain, the seed count when
    fewer than expected, the paper flag (†) and the tie mark (≈). Each renderer only decorates
    them (``*_MARKS`` templates), so the formats never disagree on what a cell says."""
    digits = cell.digits
    marks: list[Mark] = []
    if cell.std is not None:
        marks.append(("std", (number(cell.std, digits),)))
    if cell.low is not None and cell.high is not None:
        marks.append(("interval", (number(cell.low, digits), number(cell.high, digits))))
    if cell.ratio is not None:
        marks.append(("ratio", (ratio_text(cell),)))
    if cell.delta is not None:
        marks.append(("gain", (number(cell.delta, digits, signed=True),)))
    if cell.show_n:
        marks.append(("n", (str(cell.n),)))
    if cell.flag:
        marks.append(("flag", ()))
    if cell.tie:
        marks.append(("tie", ()))
    return marks


def decorate(
    cell: Cell, templates: dict[str, str], mean: str, convert: Callable[[str], str] = str
) -> str:
    """``mean`` (the cell's mean as the format prints it) followed by :func:`cell_marks`, each
    through its format's template (``"std": " ± {0}"``); ``convert`` turns each argument into
    the format's text (LaTeX's escapes and minus sign)."""
    return mean + "".join(
        templates[kind].format(*map(convert, args)) for kind, args in cell_marks(cell)
    )


def listed_notes(table: Table) -> list[str]:
    """The table's notes, failed and skipped runs first, capped at ``MAX_LISTED``."""

    def rank(note: str) -> int:
        state = note.split(": ", 1)[-1].split(" ", 1)[0]
        return _NOTE_ORDER.index(state) if state in _NOTE_ORDER else -1

    notes = sorted(table.notes, key=rank)
    if len(notes) > MAX_LISTED:
        rest = len(notes) - MAX_LISTED
        notes = [*notes[:MAX_LISTED], f"... and {rest} more (see `bench status --out DIR`)"]
    return notes


#: the heading of the runs a table leaves out (its ``notes``)
NOT_IN_TABLE = "Not in the table"


def note_sections(table: Table) -> list[tuple[str, list[str]]]:
    """(heading, lines) under the table: its remarks, then the runs not in it; none empty."""
    sections = [(table.remarks_title, table.remarks), (NOT_IN_TABLE, listed_notes(table))]
    return [(title, lines) for title, lines in sections if lines]


def ratio_text(cell: Cell) -> str:
    return f"×{cell.ratio:.2f}" if cell.ratio is not None else ""


#: a code span (`...`): Markdown shows its text as written
_CODE_SPAN = re.compile(r"(`[^`]*`)")


def markdown_text(text: str, in_table: bool = False) -> str:
    """``text`` as Markdown shows it literally: a backslash and ``<`` escaped (no raw HTML such
    as ``<script>`` reaches the page), and in a table cell ``|`` too (it would end the cell).
    Code spans (`...`) keep their text, but for ``|`` in a table cell (GitHub's rule)."""
    parts = []
    for k, part in enumerate(_CODE_SPAN.split(text)):
        if k % 2 == 0:  # outside a code span
            part = part.replace("\\", "\\\\").replace("<", "\\<")
        if in_table:
            part = part.replace("|", "\\|")
        parts.append(part)
    return "".join(parts)


#: the widest note a table shows (the sweep's summary, ``bench status``): longer ones lose
#: their last clauses, never part of one (``bench status --out DIR --failed`` has them whole)
NOTE_WIDTH = 72
_CLAUSE_END = re.compile(r"(?<=[;:.])\s+")


def short_note(note: str, width: int = NOTE_WIDTH) -> str:
    """The first line of ``note``, shortened to ``width`` at a clause boundary (after ``;``,
    ``:`` or ``.``); ``...`` marks the clauses left out. A first clause longer than ``width``
    is shown whole: a note is never cut inside a clause. A first clause that only introduces
    the next (``stale:``) keeps the next one whole too, so the note still says what it is."""
    line = note.strip().splitlines()[0] if note.strip() else ""
    if len(line) <= width:
        return line
    clauses = _CLAUSE_END.split(line)
    if len(clauses) == 1:
        return line
    kept, rest = clauses[0], clauses[1:]
    if kept.endswith(":"):  # a label: what follows is the note
        kept, rest = f"{kept} {rest[0]}", rest[1:]
    while rest and len(f"{kept} {rest[0]} ...") <= width:
        kept, rest = f"{kept} {rest[0]}", rest[1:]
    return f"{kept.rstrip(';:')} ..." if rest else kept
