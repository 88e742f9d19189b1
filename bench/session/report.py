"""``debias_bench.report``: the text ``bench report`` prints, from Python.

:class:`ReportRequest` is what one report shows; :func:`report_text` renders it (the command
prints it, or writes it with ``-o``); :func:`report` is the same with keywords. Reads only: it
works while a sweep is running, and lists the runs not (yet) in each table, also those of a
plugin that is not loaded (in each table's own notes, in every format).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from debias_bench.analysis.tuning_report import split_tuned, tuned_tables
from debias_bench.errors import ConfigError
from debias_bench.reporting import ALL, ReportOptions, Table, build_tables, load_paper, render
from debias_bench.reporting.foreign import foreign_runs
from debias_bench.reporting.grouping import apply_where, parse_where
from debias_bench.reporting.intervals import ALPHA, BOOTSTRAP_SEED, RESAMPLES, IntervalSpec
from debias_bench.reporting.layout import reference_layout
from debias_bench.reporting.paper import DEFAULT_PAPER
from debias_bench.reporting.records import load_records
from debias_bench.runs.store import check_store


def interval_spec(
    interval: str | None,
    alpha: float | None = None,
    resamples: int | None = None,
    seed: int | None = None,
    default: str | None = None,
) -> IntervalSpec | None:
    """The interval ``interval`` (else ``default``) with its settings; a setting without an
    interval (or a bootstrap one with a t-interval) is a usage error, so that no option is
    silently ignored. The names are the flags' (``--interval``, ``--alpha``, ...)."""
    kind = interval or default
    bootstrap = {"--bootstrap-resamples": resamples, "--bootstrap-seed": seed}
    given = [k for k, v in bootstrap.items() if v is not None]
    if kind is None:
        alone = given + (["--alpha"] if alpha is not None else [])
        if alone:
            raise ConfigError(
                f"{', '.join(alone)} needs --interval",
                hint="add --interval (t) or --interval bootstrap",
            )
        return None
    if given and kind != "bootstrap":
        raise ConfigError(
            f"{', '.join(given)} needs --interval bootstrap", hint="add it, or drop them"
        )
    try:
        return IntervalSpec(
            kind=kind,
            alpha=ALPHA if alpha is None else alpha,
            resamples=RESAMPLES if resamples is None else resamples,
            seed=BOOTSTRAP_SEED if seed is None else seed,
        )
    except ValueError as error:
        raise ConfigError(
            str(error), hint="--alpha in (0, 1), e.g. 0.05; --bootstrap-resamples >= 1"
        ) from None


def default_ours() -> str | None:
    """The method whose gain is bracketed by default: the paper's (ETF-Debias)."""
    return reference_layout().ours


@dataclass(frozen=True)
class ReportRequest:
    """What one report shows: the store, which runs, which tables, in which format."""

    out: Path
    table: str = ALL
    format: str = "markdown"
    opts: ReportOptions = field(default_factory=ReportOptions)
    paper: str | None = None  # compare with this reference (``--compare-paper``)
    protocol: str | None = None
    preset: str | None = None
    where: tuple[str, ...] = ()
    fragment: bool = False


@dataclass
class Report:
    """A rendered report: its text, its tables, the records it drew on, and the notes for the
    console (what ``bench report`` prints on stderr)."""

    text: str
    tables: list[Table]
    records: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def report_text(request: ReportRequest) -> Report:
    """The rendered report of ``request``."""
    store = check_store(request.out)  # no store: a ConfigError naming it
    foreign = foreign_runs(store)  # runs of a plugin not loaded: set apart, named
    records = load_records(store, skip=foreign.run_ids)
    notes = []
    if foreign.run_ids and records.empty:
        raise ConfigError(f"nothing to report: {foreign.text()}", hint=foreign.hint())
    if records.empty:
        notes.append(f"no runs under {store.root} yet (an empty run store)")
    for column in ("protocol", "preset"):
        wanted = getattr(request, column)
        if wanted:
            records = records[records[column] == wanted]
    records = apply_where(records, parse_where(list(request.where)))
    opts = request.opts
    paper = load_paper(request.paper) if request.paper else None
    every_run = records
    records, tuned = split_tuned(request.out, records)  # bench tune's search runs apart
    tables = build_tables(records, request.table, opts, paper)
    if request.table == ALL:
        tables += tuned_tables(tuned, opts)
    if foreign.run_ids:  # in each table's own output (stdout, -o, every format), not stderr only
        note = f"{foreign.text()}: left out of every table; {foreign.hint()}"
        notes.append(note)
        for table in tables:
            table.notes.append(note)
    if request.format == "html":  # one page: the tables, the plots, failures and provenance
        from debias_bench.reporting.render_html import page  # matplotlib only when asked

        text = page(store, tables, records, opts, paper, runs=every_run)
    else:
        text = render(tables, request.format, standalone=not request.fragment)
    return Report(text, tables, records, notes)


#: ``ours`` when it is not given: the paper's method
PAPER_OURS = "paper"


def report(
    store: str | Path,
    table: str = ALL,
    format: str = "markdown",
    *,
    selection: str = "last",
    metric: str = "accuracy",
    split: str = "test",
    ours: str | None = PAPER_OURS,
    interval: str | None = None,
    alpha: float | None = None,
    bootstrap_resamples: int | None = None,
    bootstrap_seed: int | None = None,
    compare_paper: bool = False,
    paper: str = DEFAULT_PAPER,
    protocol: str | None = None,
    preset: str | None = None,
    where: Iterable[str] = (),
    fragment: bool = False,
) -> str:
    """The text ``bench report`` prints for the same arguments (``--out store --table table
    --format format ...``; ``ours`` None: no bracketed gain, by default the paper's method;
    ``where``: ``["lr=0.001"]`` as ``--where``). Raises the
    :class:`~debias_bench.errors.BenchError` the command prints."""
    request = ReportRequest(
        out=Path(store),
        table=table,
        format=format,
        opts=ReportOptions(
            selection=selection,
            metric=metric,
            split=split,
            ours=default_ours() if ours == PAPER_OURS else ours,
            interval=interval_spec(interval, alpha, bootstrap_resamples, bootstrap_seed),
        ),
        paper=paper if compare_paper else None,
        protocol=protocol,
        preset=preset,
        where=tuple(where),
        fragment=fragment,
    )
    return report_text(request).text
