"""The comparison rendered: the Markdown table, its notes, and the generated README."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from debias_bench.reporting.layout import method_name
from debias_bench.reporting.stats import STATISTIC

from .compare import MIN_GAP, Comparison, Section, Variant, variants
from .export import TAIL, TAIL_COLUMN

VARIANTS_HEADING = "Runs off the recipe (evidence for the reasons; not compared with the paper)"


def _stat(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "–"
    return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def reason_notes(cells: list[Comparison]) -> list[str]:
    """The distinct reasons of the flagged cells, in table order (numbered in the table)."""
    notes: list[str] = []
    for c in cells:
        if c.flagged and c.reason not in notes:
            notes.append(c.reason)
    return notes


#: marks a cell whose flag the runs' last-evaluations means would decide otherwise
DIP_MARK = "†"


def tail_note(cells: list[Comparison]) -> str:
    """The cells marked :data:`DIP_MARK`, with the numbers that decide otherwise ("" if none)."""
    marked = [c for c in cells if c.tail_disagrees]
    if not marked:
        return ""
    listed = "; ".join(
        f"{method_name(c.method)} {c.ratio:g} %: {_stat(c.tail_mean, c.tail_std)} "
        f"({'within' if c.flagged else 'flagged'})"
        for c in marked
    )
    return (
        f"{DIP_MARK} The flag rule decides otherwise on the mean of each run's last {TAIL} "
        f"evaluations (`{TAIL_COLUMN}`), so the `last` number sits on one evaluation's dip "
        f"or spike: {listed}."
    )


def render_table(cells: list[Comparison], numbered: bool = False) -> str:
    """The comparison as a GitHub Markdown table; flagged differences marked ``⚑``. With
    ``numbered``, a flagged cell's reason is a reference ``(k)`` to :func:`reason_notes`."""
    notes = reason_notes(cells)
    last = any(c.last_mean is not None for c in cells)  # another selection, `last` beside it
    head = "| method | ratio (%) | ours | n | paper | ours − paper | flag | reason |"
    rule = "|---|---:|---:|---:|---:|---:|:---:|---|"
    if last:
        head, rule = head + " ours, `last` |", rule + "---:|"
    lines = [head, rule]
    for c in cells:
        diff = "–" if c.diff is None else f"{c.diff:+.2f}"
        ours = _stat(c.ours_mean, c.ours_std) if c.n else "not run"
        flag = ("⚑" if c.flagged else "") + (DIP_MARK if c.tail_disagrees else "")
        reason = f"({notes.index(c.reason) + 1})" if numbered and c.flagged else c.reason
        line = (
            f"| {method_name(c.method)} | {c.ratio:g} | {ours} | {c.n} | "
            f"{_stat(c.paper_mean, c.paper_std)} | {diff} | {flag} | {reason} |"
        )
        lines.append(line + (f" {_stat(c.last_mean, c.last_std)} |" if last else ""))
    return "\n".join(lines)


def of_methods(frame: pd.DataFrame, cells: Sequence[Comparison]) -> pd.DataFrame:
    """The rows of the methods a table shows (its caption names their devices and code)."""
    return frame[frame["method"].isin([c.method for c in cells])]


def caption(
    frame: pd.DataFrame,
    dataset: str,
    selection: str,
    protocol: str,
    preset: str,
    paper_statistic: str = "as printed (three trials)",
) -> str:
    devices = ", ".join(sorted({str(d) for d in frame["device"].dropna()})) or "–"
    versions = ", ".join(sorted({str(v) for v in frame["code_version"].dropna()})) or "–"
    return (
        f"{dataset}, selection `{selection}`, protocol `{protocol}`, preset `{preset}`; ours: "
        f"{STATISTIC}; paper: {paper_statistic}. Flag ⚑: |ours − paper| > "
        f"max({MIN_GAP:g} points, sqrt(std_ours² + std_paper²)). Device: {devices}; "
        f"code version: {versions}."
    )


def render_readme(
    frame: pd.DataFrame,
    cells: list[Comparison],
    dataset: str,
    selection: str,
    protocol: str,
    preset: str,
    explanations: dict[str, Any],
    csv_name: str,
    expected_seeds: int = 3,
    now: datetime | None = None,
    more: Sequence[Section] = (),
) -> str:
    """results/reproduction/README.md: the table, the incomplete cells and the notes; ``more``:
    the sections of methods compared with their own papers, after the main table."""
    now = now or datetime.now(UTC)
    short: dict[tuple[str, int], list[str]] = {}
    for c in [*cells, *(c for section in more for c in section.cells)]:
        if c.n < expected_seeds and c.paper_mean is not None:
            short.setdefault((c.method, c.n), []).append(f"{c.ratio:g}")
    incomplete = [
        f"{method_name(method)}: {n} of {expected_seeds} seeds at {', '.join(ratios)} %"
        for (method, n), ratios in short.items()
    ]
    parts = [
        f"# Reproduction: {dataset} against the ETF-Debias paper",
        "",
        f"Generated {now:%Y-%m-%d %H:%M} UTC by `bench reproduce table {csv_name} --readme` "
        f"from `{csv_name}` ({len(frame)} rows: one per done run and selection).",
        "",
        caption(of_methods(frame, cells), dataset, selection, protocol, preset),
        "",
        *table_with_verdicts(cells),
    ]
    found = variants(frame, dataset, selection, protocol, preset)
    if found:
        parts += ["", f"{VARIANTS_HEADING}:", "", render_variants(found)]
    for section in more:
        parts += ["", render_section(frame, dataset, section, protocol, preset)]
    if incomplete:
        parts += ["", "Cells without all seeds (running, failed or not run yet):", ""]
        parts += [f"- {line}" for line in incomplete]
    notes = explanations.get("notes") or []
    if notes:
        parts += ["", "## Notes", ""]
        parts += [f"- {str(note).strip()}" for note in notes]
    return "\n".join(parts) + "\n"


def render_variants(found: list[Variant]) -> str:
    """The runs off the recipe as a Markdown table."""
    lines = [
        "| method | ratio (%) | settings off the recipe | ours | n |",
        "|---|---:|---|---:|---:|",
    ]
    for v in found:
        lines.append(
            f"| {method_name(v.method)} | {v.ratio:g} | `{v.overrides}` | "
            f"{_stat(v.mean, v.std)} | {v.n} |"
        )
    return "\n".join(lines)


def render_section(
    frame: pd.DataFrame, dataset: str, section: Section, protocol: str, preset: str
) -> str:
    """The runs of some methods against their own paper: a heading naming the methods and the
    paper, the caption (that paper's selection and statistic), the table and its reasons."""
    paper, cells = section.paper, section.cells
    names = ", ".join(dict.fromkeys(method_name(c.method) for c in cells))
    sources = sorted({paper.sources.get(c.method, paper.source) for c in cells})
    theirs = of_methods(frame, cells)
    text = [
        f"## {names} against their own papers",
        "",
        "Papers: " + "; ".join(sources) + ".",
        "",
        caption(theirs, dataset, section.selection, protocol, preset, paper.statistic),
        "",
        *table_with_verdicts(cells),
    ]
    if any(c.last_mean is not None for c in cells):
        text[5:5] = [
            "",
            f"Column `ours, last`: the same runs' last model (selection `last`), mean ± sample "
            f"standard deviation; shown beside `{section.selection}`, not compared with the "
            "paper.",
        ]
    return "\n".join(text)


def table_with_verdicts(cells: list[Comparison]) -> list[str]:
    """The numbered table, how many cells it flags, its dip note and its numbered reasons."""
    flagged = sum(c.flagged for c in cells)
    lines = [
        render_table(cells, numbered=True),
        "",
        f"{flagged} of {sum(c.diff is not None for c in cells)} compared cells flagged.",
    ]
    if dips := tail_note(cells):
        lines += ["", dips]
    if reasons := reason_notes(cells):
        lines += ["", "Reasons for the flagged cells:", ""]
        lines += [f"{k}. {text}" for k, text in enumerate(reasons, 1)]
    return lines
