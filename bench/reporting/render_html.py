"""HTML: one self-contained page (tables, plots, failures, each run's provenance).

Everything is inline (CSS, PNGs as data URIs) and a Content-Security-Policy forbids any other
source, so the page opens offline, attached to a mail or archived next to the run store.
Every piece of text is escaped: run ids, notes and error messages come from the run store.
"""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd

from debias_bench.errors import CorruptDataError
from debias_bench.reporting.format import decorate, note_sections, number
from debias_bench.reporting.model import Cell, Column, Table
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.runs import run_table, unfinished_notes
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

#: nothing but inline styles and data: images; no script, no fetch
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px;
  padding: 0 1em; color: #222; background: #fff; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0 .4em; }
h3 { font-size: 1.05em; margin: 2em 0 .2em; } .caption { font-size: .9em; color: #444; }
th, td { padding: .25em .6em; border-bottom: 1px solid #e4e4e4; text-align: right; }
th.label, td.label, table.runs th, table.runs td { text-align: left; }
thead th { border-bottom: 2px solid #555; }
tr.group-start td { border-top: 2px solid #999; }
tr.paper td, tr.diff td { color: #555; font-style: italic; }
td.sep, th.sep { border-left: 2px solid #999; }
.std, .n, .missing, .ci { color: #666; font-size: .85em; }
.gain { font-size: .85em; font-weight: 600; }
.notes { font-size: .85em; color: #444; } .notes ul { margin: .2em 0 1.5em; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; flex: 0 1 560px; } figure img { width: 100%; height: auto; }
figcaption { font-size: .85em; color: #555; text-align: center; }
.failures li { color: #a00; } .failures li.none { color: inherit; }
details summary { cursor: pointer; font-weight: 600; }
code { font-size: .9em; }
"""
#: the runs listed under "Failures": they ended without a result and will not finish alone
FAILURES = (RunState.FAILED.value, RunState.DEAD.value, RunState.CORRUPT.value)
#: the page's sections: (id, link text)
NAV = (
    ("plots", "Plots"),
    ("ranks", "Ranks"),
    ("tables", "Tables"),
    ("failures", "Failures"),
    ("runs", "Runs"),
)
#: the provenance table's columns: (key, header)
RUN_FIELDS = (
    ("run_id", "run id"),
    ("state", "state"),
    ("method", "method"),
    ("dataset", "dataset"),
    ("ratio", "ratio %"),
    ("seed", "seed"),
    ("protocol", "protocol"),
    ("preset", "preset"),
    ("code_version", "code version"),
    ("git_commit", "git commit"),
    ("torch", "torch"),
    ("device", "device"),
    ("train_time", "train time"),
)


@dataclass(frozen=True)
class Plot:
    name: str  # the file stem `bench report --plot` would write it under
    png: bytes
    alt: str = "accuracy against ratio"  # what it shows, before the name


def inline(text: str) -> str:
    """Escaped text; `code` in backticks (captions, notes) becomes <code>."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", escape(text))


#: how HTML prints each mark of a cell (:func:`~debias_bench.reporting.format.cell_marks`)
MARKS = {
    "std": ' <span class="std">± {0}</span>',
    "interval": ' <span class="ci">[{0}, {1}]</span>',
    "ratio": ' <span class="std">({0})</span>',
    "gain": ' <span class="gain">({0})</span>',
    "n": ' <span class="n">(n={0})</span>',
    "flag": ' <sup title="differs from the paper by more than the combined std">†</sup>',
    "tie": ' <sup class="tie" title="not distinguishable from the best of its row">≈</sup>',
}


def cell_html(cell: Cell) -> str:
    """A cell with the marks Markdown prints, as markup the style sheet can set off."""
    if not cell.has_value:
        missing = cell.missing and f' <span class="missing">({escape(cell.missing)})</span>'
        return "–" + (missing or "")
    assert cell.mean is not None
    text = escape(number(cell.mean, cell.digits, cell.signed))
    return decorate(cell, MARKS, f'<strong class="best">{text}</strong>' if cell.bold else text)


def _sep(column: Column, table: Table) -> str:
    """The class of a column set apart (the paper's "Average")."""
    return ' class="sep"' if column.key in table.separated else ""


def _header(column: Column, table: Table) -> str:
    marker = "".join(f"<sup>{escape(m)}</sup>" for m in (column.marker, column.terms_mark) if m)
    return f"<th{_sep(column, table)}>{escape(column.label)}{marker}</th>"


def render_table(table: Table, index: int = 0) -> str:
    head = "".join(f'<th class="label">{escape(h)}</th>' for h in table.row_headers)
    head += "".join(_header(c, table) for c in table.columns)
    body = []
    previous: tuple[str, ...] | None = None
    for i, row in enumerate(table.rows):
        starts = i > 0 and row.group != table.rows[i - 1].group  # a rule between datasets
        classes = [escape(row.kind), "group-start"] if starts else [escape(row.kind)]
        labels = []
        for k, label in enumerate(row.labels):  # a label only where it changes (as in LaTeX)
            same = previous is not None and previous[: k + 1] == row.labels[: k + 1]
            shown = "" if same and k < len(row.labels) - 1 else table.display.get(label, label)
            labels.append(f'<td class="label">{escape(shown)}</td>')
        previous = row.labels
        cells = [f"<td{_sep(c, table)}>{cell_html(row.cells[c.key])}</td>" for c in table.columns]
        body.append(f'<tr class="{" ".join(classes)}">{"".join(labels + cells)}</tr>')
    parts = [
        f'<div class="table" id="table-{index}" data-table="{escape(table.name)}">',
        f"<h3>{escape(table.title)}.</h3>",
        f'<p class="caption">{inline(table.caption)}</p>',
        f"<table><thead><tr>{head}</tr></thead>",
        "<tbody>\n" + "\n".join(body) + "\n</tbody></table>",
    ]
    for title, lines in note_sections(table):
        items = "".join(f"<li>{inline(n)}</li>" for n in lines)
        parts.append(f'<div class="notes">{inline(title)}:<ul>{items}</ul></div>')
    return "\n".join(parts) + "\n</div>"


def figure_html(plot: Plot) -> str:
    data = base64.b64encode(plot.png).decode("ascii")
    name = escape(plot.name)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{escape(plot.alt)}: {name}">'
        f"<figcaption>{name}</figcaption></figure>"
    )


def runs_html(runs: Sequence[dict[str, str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for _, h in RUN_FIELDS)
    rows = "\n".join(
        "<tr>" + "".join(f"<td>{escape(r.get(k, ''))}</td>" for k, _ in RUN_FIELDS) + "</tr>"
        for r in runs
    )
    return (
        f"<details><summary>{len(runs)} runs: state and provenance</summary>\n"
        f'<table class="runs"><thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody></table>'
        "\n</details>"
    )


def render(
    tables: list[Table],
    plots: Sequence[Plot] = (),
    failures: Sequence[str] = (),
    runs: Sequence[dict[str, str]] = (),
    title: str = "bench report",
    summary: str = "",
    ranks: Sequence[Plot] = (),
) -> str:
    """The page; without plots, failures or runs (``render(tables, "html")``) it holds the
    tables alone; ``ranks``: the critical-difference diagrams (``--interval``)."""
    sections = [f"<h1>{escape(title)}</h1>"] + ([f"<p>{inline(summary)}</p>"] if summary else [])
    if plots:
        figures = "\n".join(figure_html(p) for p in plots)
        figures = f'<div class="plots">\n{figures}\n</div>'
        sections.append(f'<section id="plots"><h2>Accuracy against ratio</h2>\n{figures}</section>')
    if ranks:
        figures = "\n".join(figure_html(p) for p in ranks)
        sections.append(
            '<section id="ranks"><h2>Ranks across the grid</h2>\n<p class="caption">Each '
            "accuracy table's methods at their average rank over its cells (1 = best mean), "
            "joined by a bar where the Nemenyi test after a Friedman test does not tell them "
            "apart; the critical difference in red. Each table's caption gives the numbers."
            f'</p>\n<div class="plots">\n{figures}\n</div></section>'
        )
    body = "\n".join(render_table(t, i) for i, t in enumerate(tables, start=1))
    body = body or "<p>No runs for this table yet.</p>"
    sections.append(f'<section id="tables"><h2>Tables</h2>\n{body}\n</section>')
    if failures or runs:
        items = "".join(f"<li>{inline(f)}</li>" for f in failures) or '<li class="none">none</li>'
        sections.append(
            f'<section id="failures"><h2>Failures</h2><ul class="failures">{items}</ul></section>'
        )
    if runs:
        sections.append(f'<section id="runs"><h2>Runs</h2>\n{runs_html(runs)}\n</section>')
    links = [(k, t) for k, t in NAV if f'<section id="{k}">' in "".join(sections)]
    if len(links) > 1:
        nav = " · ".join(f'<a href="#{k}">{t}</a>' for k, t in links)
        sections.insert(1, f"<nav>{nav}</nav>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )


# ------------------------------------------------------------------------- the full page
def _text(value: Any, fmt: str = "{}") -> str:
    """A record's value as text; a missing one (None, NaN) as nothing."""
    missing = value is None or (isinstance(value, float) and pd.isna(value))
    return "" if missing else fmt.format(value)


def _recorded(run_dir: RunDir) -> tuple[dict[str, Any], dict[str, Any]]:
    """(provenance, status): of the code that last started the run (status.json), else of
    the code that planned it (config.json); an unreadable file gives nothing."""
    status: dict[str, Any] = {}
    with contextlib.suppress(CorruptDataError):
        status = run_dir.status()
    provenance = status.get("provenance")
    if not provenance:
        with contextlib.suppress(CorruptDataError):
            provenance = run_dir.config().get("provenance")
    return provenance or {}, status


def run_rows(store: RunStore, records: pd.DataFrame) -> list[dict[str, str]]:
    """A row per run of ``records``: its state, configuration and provenance."""
    rows = []
    for run in run_table(records).sort_values("run_id").to_dict("records"):
        provenance, status = _recorded(store.run(str(run["run_id"])))
        device = _text(run.get("device")) or _text(status.get("device"))
        row = {k: _text(run.get(k)) for k, _ in RUN_FIELDS if k in run}
        row.update({k: _text(provenance.get(k)) for k in ("code_version", "git_commit", "torch")})
        row.update(ratio=_text(run.get("ratio"), "{:g}"), seed=_text(run.get("seed"), "{:.0f}"))
        row.update(device=device, train_time=_text(run.get("train_time_s"), "{:.1f} s"))
        rows.append(row)
    return rows


def page(
    store: RunStore,
    tables: list[Table],
    records: pd.DataFrame,
    opts: ReportOptions,
    paper: PaperNumbers | None = None,
    runs: pd.DataFrame | None = None,
) -> str:
    """The full page: ``tables``, the plots of ``records`` (``--plot``'s figures), and the
    failures and provenance of ``runs`` (default: ``records``)."""
    from debias_bench.reporting.plots import (  # matplotlib: here only
        png_bytes,
        rank_figures,
        ratio_figures,
    )

    runs = records if runs is None else runs
    plots = [Plot(stem, png_bytes(fig)) for stem, fig in ratio_figures(records, opts, paper)]
    ranks = [
        Plot(stem, png_bytes(fig), "critical-difference diagram")
        for stem, fig in rank_figures(tables)
    ]
    listed = run_table(runs)
    failures = unfinished_notes(listed[listed["state"].isin(FAILURES)])
    counts = listed["state"].value_counts().sort_index()
    summary = f"Run store `{store.root}`: {len(listed)} runs (" + (
        ", ".join(f"{n} {state}" for state, n in counts.items()) or "none"
    )
    summary += f"); selection `{opts.selection}`, {opts.split} {opts.metric}."
    return render(tables, plots, failures, run_rows(store, runs), summary=summary, ranks=ranks)
