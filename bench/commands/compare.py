"""`bench compare A B [B ...]`: the command line of :mod:`debias_bench.session.compare`
(what the comparison is and how it is tested: there)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from debias_bench import paths
from debias_bench.config.selection import SELECTIONS
from debias_bench.errors import ConfigError
from debias_bench.reporting import METRICS, ReportOptions
from debias_bench.reporting.layout import reference_layout
from debias_bench.reporting.paper import DEFAULT_PAPER
from debias_bench.session import compare as session_compare
from debias_bench.session.compare import FORMATS, POWER, CompareRequest, check_power, compare_text

from .flags import add_interval_options, interval_of


def compare_doc() -> str | None:
    """What ``bench compare --help`` describes: the session module's second paragraph."""
    doc = session_compare.__doc__
    return doc.split("\n\n")[1] if doc else None


def cmd_compare(args: argparse.Namespace) -> int:
    if args.csv is not None and args.out is not None:
        raise ConfigError("--csv and --out both given", hint="compare from one source")
    if args.csv is None and args.out is None:
        args.out = str(paths.DEFAULT_OUT)
    check_power(args.power)
    request = CompareRequest(
        a=args.a,
        others=tuple(args.b),
        out=Path(args.out) if args.out else None,
        csv=Path(args.csv) if args.csv else None,
        dataset=args.dataset,
        opts=ReportOptions(
            selection=args.selection,
            metric=args.metric,
            split=args.split,
            ours=None,
            interval=interval_of(args, default="t"),
        ),
        protocol=args.protocol,
        preset=args.preset,
        where=tuple(args.where or ()),
        power=args.power,
        paper=args.paper if args.compare_paper else None,
    )
    sys.stdout.write(compare_text(request, args.format))
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    ours = reference_layout().ours
    p = sub.add_parser(
        "compare",
        help="method A against B per cell: difference, interval, test, Holm p, seeds needed",
        description=compare_doc(),
    )
    p.add_argument("a", metavar="A", help=f"the method compared (e.g. {ours or 'etf_debias'})")
    p.add_argument("b", metavar="B", nargs="+", help="the method(s) it is compared with")
    p.add_argument("--out", help=f"the run store to read (default {paths.DEFAULT_OUT})")
    p.add_argument(
        "--csv",
        help="read a reproduction CSV instead (bench reproduce export; e.g. "
        "results/reproduction/cmnist.csv): its recipe runs",
    )
    p.add_argument("--dataset", help="only this dataset")
    p.add_argument("--selection", default="last", choices=SELECTIONS)
    p.add_argument("--metric", default="accuracy", choices=METRICS)
    p.add_argument("--split", default="test", choices=["test", "valid"])
    p.add_argument("--protocol", help="only runs of this protocol")
    p.add_argument("--preset", help="only runs of this preset")
    p.add_argument("--where", action="append", metavar="KEY=VALUE", help="as bench report's")
    p.add_argument(
        "--power",
        type=float,
        default=POWER,
        help=f"the power the seeds needed are for (default {POWER})",
    )
    p.add_argument(
        "--compare-paper",
        action="store_true",
        help="add the paper's difference and whether its claim holds here",
    )
    p.add_argument("--paper", default=DEFAULT_PAPER, help="the paper's reference numbers")
    p.add_argument("--format", default="text", choices=FORMATS)
    add_interval_options(p, "the interval of each difference")
    p.set_defaults(func=cmd_compare)
