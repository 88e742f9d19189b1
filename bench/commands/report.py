"""`bench report`: the paper's tables (and plots) from the runs of a run store.

Reads only: works while a sweep is running, and lists the runs not (yet) in each table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from debias_bench import paths
from debias_bench.config.selection import SELECTIONS
from debias_bench.errors import BenchError, ConfigError
from debias_bench.reporting import (
    ALL,
    FORMATS,
    METRICS,
    TABLES,
    ReportOptions,
    load_paper,
)
from debias_bench.reporting.layout import reference_layout
from debias_bench.reporting.paper import DEFAULT_PAPER
from debias_bench.runs.jsonio import check_output, write_output
from debias_bench.session.report import ReportRequest, report_text

from .flags import add_interval_options, interval_of


def options(args: argparse.Namespace) -> ReportOptions:
    ours = None if args.ours.lower() in ("", "none") else args.ours
    return ReportOptions(
        selection=args.selection,
        metric=args.metric,
        split=args.split,
        ours=ours,
        interval=interval_of(args),
    )


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
    made = report_text(request)
    for note in made.notes:
        print(f"note: {note}", file=sys.stderr)
    text, tables, records = made.text, made.tables, made.records
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
