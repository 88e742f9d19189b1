"""Option blocks that several commands share (argparse lives in the command layer only):
each is written once here and added to every parser that takes it."""

from __future__ import annotations

import argparse

from debias_bench.reporting.significance import (
    ALPHA,
    BOOTSTRAP_SEED,
    INTERVALS,
    RESAMPLES,
    IntervalSpec,
)
from debias_bench.session.report import interval_spec


def interval_of(args: argparse.Namespace, default: str | None = None) -> IntervalSpec | None:
    """The interval the flags ask for (``bench report`` and ``bench compare``)."""
    return interval_spec(
        args.interval, args.alpha, args.bootstrap_resamples, args.bootstrap_seed, default
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
