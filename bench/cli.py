"""Command-line interface: ``bench run | status | report | list | data``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from debias_bench.commands import COMMANDS
from debias_bench.errors import BenchError
from debias_bench.launchers.plugins import import_plugins


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench", description="Benchmark harness for debiasing methods."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        import_plugins()  # BENCH_PLUGINS: the user's own methods and datasets
        return args.func(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
