"""`bench data`: prepare datasets from their raw sources."""

from __future__ import annotations

import argparse

from debias_bench import paths
from debias_bench.registry import DATASETS

from .common import data_args, floats


def cmd_data(args: argparse.Namespace) -> int:
    raw, root = paths.raw_root(args.raw_root), paths.data_root(args.data_root)
    for name in DATASETS.resolve(args.name):
        family = DATASETS.get(name)(raw, root)
        folder = family.prepare(floats(args.ratios) if args.ratios else None)
        print(f"{name}: prepared in {folder}")
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="prepare datasets")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    prepare = data_sub.add_parser("prepare", help="build a dataset from its raw sources")
    prepare.add_argument("name", help="dataset name, comma list or 'all'")
    prepare.add_argument("--ratios", help="only these ratios (%%)")
    data_args(prepare)
    prepare.set_defaults(func=cmd_data)
