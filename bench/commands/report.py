"""`bench report`: the paper's tables (and plots) from the runs of a run store.

Reads only: works while a sweep is running, and lists the runs not (yet) in each table.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from debias_bench import paths
from debias_bench.analysis.tuning_report import split_tuned, tuned_tables
from debias_bench.config.selection import SELECTIONS
from debias_bench.errors import BenchError, ConfigError
from debias_bench.launchers.preflight import check_store
from debias_bench.reporting import (
    ALL,
    FORMATS,
    METRICS,
    TABLES,
    ReportOptions,
    Table,
    build_tables,
    load_paper,
    load_records,
    render,
)
from debias_bench.reporting.foreign import foreign_runs
from debias_bench.reporting.grouping import apply_where, parse_where
from debias_bench.reporting.layout import reference_layout
from debias_bench.reporting.paper import DEFAULT_PAPER
from debias_bench.reporting.significance import (
    ALPHA,
    BOOTSTRAP_SEED,
    INTERVALS,
    RESAMPLES,
    IntervalSpec,
)
from debias_bench.runs.jsonio import check_output, write_output


def interval_spec(args: argparse.Namespace, default: str | None = None) -> IntervalSpec | None:
    """``--interval`` (else ``default``) and its settings; a setting without an interval (or a
    bootstrap one with a t-interval) is a usage error, so that no option is silently ignored."""
    kind = args.interval or default
    bootstrap = {
        "--bootstrap-resamples": args.bootstrap_resamples,
        "--bootstrap-seed": args.bootstrap_seed,
    }
    given = [k for k, v in bootstrap.items() if v is not None]
    if kind is None:
        alone = given + (["--alpha"] if args.alpha is not None else [])
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
            alpha=ALPHA if args.alpha is None else args.alpha,
            resamples=RESAMPLES if args.bootstrap_resamples is None else args.bootstrap_resamples,
            seed=BOOTSTRAP_SEED if args.bootstrap_seed is None else args.bootstrap_seed,
        )
    except ValueError as error:
        raise ConfigError(
            str(error), hint="--alpha in (0, 1), e.g. 0.05; --bootstrap-resamples >= 1"
        ) from None


def options(args: argparse.Namespace) -> ReportOptions:
    ours = None if args.ours.lower() in ("", "none") else args.ours
    return ReportOptions(
        selection=args.selection,
        metric=args.metric,
        split=args.split,
        ours=ours,
        interval=interval_spec(args),
    )


def add_interval_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--interval [t|bootstrap]``, ``--alpha``, ``--bootstrap-resamples``, ``--bootstrap-seed``
    (``bench report`` and ``bench compare``)."""
    parser.add_argument(
        "--interval",
        nargs="?",
        const="t",
        choices=INTERVALS,
        help=f"{what} (default t when given without a value: a t-interval; bootstrap: a "
        "percentile bootstrap interval)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        help=f"level of the tests; the intervals cover 1 - alpha (default {ALPHA})",
    )
    parser.add_argument(
        "--bootstrap-resamples",
        type=int,
        metavar="N",
        help=f"resamples of --interval bootstrap (default {RESAMPLES})",
    )
    parser.add_argument(
        "--bootstrap-seed",
        type=int,
        metavar="S",
        help=f"seed of --interval bootstrap's resampling (default {BOOTSTRAP_SEED})",
    )


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


def report_text(request: ReportRequest) -> tuple[str, list[Table], pd.DataFrame]:
    """The rendered report, its tables, and the records it drew on."""
    store = check_store(request.out)  # no store: exit 2 naming it (launchers.preflight)
    foreign = foreign_runs(store)  # runs of a plugin not loaded: set apart, named
    records = load_records(store, skip=foreign.run_ids)
    if foreign.run_ids and records.empty:
        raise ConfigError(f"nothing to report: {foreign.text()}", hint=foreign.hint())
    if records.empty:
        print(f"note: no runs under {store.root} yet (an empty run store)", file=sys.stderr)
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
        print(f"note: {note}", file=sys.stderr)
        for table in tables:
            table.notes.append(note)
    if request.format == "html":  # one page: the tables, the plots, failures and provenance
        from debias_bench.reporting.render_html import page  # matplotlib only when asked

        text = page(store, tables, records, opts, paper, runs=every_run)
    else:
        text = render(tables, request.format, standalone=not request.fragment)
    return text, tables, records


def cmd_report(args: argparse.Namespace) -> int:
    request = ReportRequest(
        out=Path(args.out),
        table=args.table,
        format=args.format,
        opts=options(args),
        paper=args.paper if args.compare_paper else None,
        protocol=args.protocol,
        preset=args.preset,
        where=tuple(args.where or ()),
        fragment=args.fragment,
    )
    if args.output:  # a folder, or one that cannot be created: one error before the work
        check_output(Path(args.output))
    if args.plot and Path(args.plot).exists() and not Path(args.plot).is_dir():
        raise ConfigError(f"--plot {args.plot} is a file, not a folder", hint="name a folder")
    text, tables, records = report_text(request)
    n_tables = len(tables)
    if args.output:  # atomic: a kill or a full disk leaves the file as it was
        write_output(Path(args.output), text)
        print(f"wrote {args.output} ({n_tables} tables)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.plot:
        from debias_bench.reporting.plots import write_plots  # matplotlib only when asked

        paper = load_paper(request.paper) if request.paper else None
        try:
            _, said = write_plots(records, tables, request.opts, Path(args.plot), paper)
        except OSError as exc:
            raise BenchError(
                f"--plot {args.plot}: cannot write the plots there ({exc.strerror or exc})",
                hint="name a folder you can write, with space left",
            ) from None
        print(said, file=sys.stderr)
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    """The ``report`` subcommand; ``--table`` offers every registered table, plugins' too (their
    modules are imported before the parser is built)."""
    ours = reference_layout().ours
    report = sub.add_parser(
        "report",
        help="the paper's tables (LaTeX, Markdown, CSV, HTML) and plots from a run store",
        description="Tables in the layouts of the paper (its reference YAML in "
        f"results/reference/{DEFAULT_PAPER}.yaml), plus the tables of the harness and of plugins.",
    )
    report.add_argument("--out", default=str(paths.DEFAULT_OUT), help="the run store to read")
    report.add_argument(
        "--table",
        default=ALL,
        choices=[*TABLES.names(), ALL],
        help=(
            "; ".join(f"{e.name}: {e.display_name}" for e in TABLES)
            + f"; {ALL} (default): "
            + ", ".join(e.name for e in TABLES if e.meta.get("in_all"))
        ).replace("%", "%%"),  # argparse formats help with %
    )
    report.add_argument(
        "--format",
        default="markdown",
        choices=FORMATS,
        help="html: one self-contained page with the tables, the plots, the failures and "
        "each run's provenance",
    )
    report.add_argument("--selection", default="last", choices=SELECTIONS)
    report.add_argument("--metric", default="accuracy", choices=METRICS)
    report.add_argument("--split", default="test", choices=["test", "valid"])
    report.add_argument(
        "--ours",
        default=ours or "none",
        help="the method whose gain or loss against the best other is bracketed ('none': off; "
        f"default: the paper's, {ours or 'none'})",
    )
    report.add_argument(
        "--compare-paper",
        action="store_true",
        help="add the paper's numbers and the difference (ours - paper) under each row",
    )
    report.add_argument("--paper", default=DEFAULT_PAPER, help="reference numbers to compare with")
    report.add_argument("--protocol", help="only runs of this protocol (official, clean)")
    report.add_argument("--preset", help="only runs of this preset (paper, quick, smoke)")
    report.add_argument(
        "--where",
        action="append",
        metavar="KEY=VALUE",
        help="only runs whose config has this value (a hyperparameter, a data option, preset; "
        "repeatable); needed when one cell would mix runs of different configurations",
    )
    report.add_argument("-o", "--output", help="write to this file instead of stdout")
    report.add_argument(
        "--fragment",
        action="store_true",
        help="LaTeX: the table environments only, to \\input into a paper",
    )
    report.add_argument(
        "--plot",
        metavar="DIR",
        help="also write accuracy-vs-ratio plots (PNG and PDF) to DIR (with --interval, the "
        "critical-difference diagram of each accuracy table too)",
    )
    add_interval_options(
        report,
        "print each cell's interval of the mean over seeds, mark the cells not distinguishable "
        "from their row's best (paired or Welch t-tests, Holm over the table), and rank the "
        "methods over the table's cells (Friedman, Nemenyi; a critical-difference diagram in "
        "HTML and with --plot)",
    )
    report.set_defaults(func=cmd_report)
