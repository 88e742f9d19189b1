"""Helpers shared by the commands."""

from __future__ import annotations

import argparse
import sys

from debias_bench.config.run_config import parse_overrides
from debias_bench.errors import ConfigError
from debias_bench.reporting.format import short_note as short_note  # the commands' notes
from debias_bench.session.run import GridRequest, RunSummary


def floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"bad list of numbers {text!r}", hint="e.g. --ratios 0.5,1,2,5") from None


def ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"bad list of integers {text!r}", hint="e.g. --seeds 0,1,2") from None


def fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def command_with_verbs(
    sub: argparse._SubParsersAction, name: str, help: str, dest: str = "verb"
) -> argparse._SubParsersAction:
    """``bench NAME VERB ...``: a command whose first argument picks one of its verbs, each
    added as a parser to what this returns (``dest`` names the verb in the usage error when
    none is given)."""
    return sub.add_parser(name, help=help).add_subparsers(dest=dest, required=True)


def data_args(p: argparse.ArgumentParser) -> None:
    """--raw-root / --data-root, shared by the commands that touch data."""
    p.add_argument(
        "--raw-root",
        help="raw downloads/releases (default $BENCH_RAW_ROOT or "
        "~/.cache/debias-bench/raw); never written",
    )
    p.add_argument(
        "--data-root",
        help="prepared datasets (default $BENCH_DATA_ROOT or ~/.cache/debias-bench/data)",
    )


def grid_of(args: argparse.Namespace) -> GridRequest:
    """The grid the flags ask for (``bench run``, ``bench reproduce run``)."""
    return GridRequest(
        methods=args.methods,
        datasets=args.datasets,
        ratios=floats(args.ratios) if args.ratios else None,
        seeds=ints(args.seeds),
        preset=args.preset,
        protocol=args.protocol,
        epochs=args.epochs,
        overrides=parse_overrides(args.set),
        data_seed=args.data_seed,
        data_options=parse_overrides(args.data_option),
        hparams=args.hparams,
        ablation=args.ablation,
    )


def printed(summary: RunSummary) -> int:
    """Print a sweep's summary as ``bench run`` does (the table on stdout, the rest on
    stderr); its exit code."""
    print(summary.table())
    for line in summary.lines():
        print(line, file=sys.stderr)
    return summary.exit_code
