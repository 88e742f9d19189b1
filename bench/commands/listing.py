"""`bench list`: registered methods, datasets, presets and trackers with their metadata."""

from __future__ import annotations

import argparse

from tabulate import tabulate

from debias_bench.config import PRESETS
from debias_bench.registry import DATASETS, METHODS


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "methods":
        rows = [
            [
                e.name,
                e.display_name,
                "yes" if e.meta.get("needs_bias_labels") else "no",
                e.meta.get("cost", ""),
                e.citation,
            ]
            for e in METHODS
        ]
        print(
            tabulate(
                rows,
                headers=["name", "paper name", "bias labels", "cost", "citation"],
                tablefmt="github",
            )
        )
    elif args.what == "datasets":
        rows = []
        for e in DATASETS:
            s = e.obj.spec
            rows.append(
                [
                    e.name,
                    e.display_name,
                    s.num_classes,
                    s.num_biases,
                    ", ".join(f"{r:g}" for r in s.ratios),
                    f"{s.image_size[0]}px",
                    s.backbone,
                    s.test_kind,
                    e.citation,
                ]
            )
        print(
            tabulate(
                rows,
                headers=[
                    "name",
                    "paper name",
                    "classes",
                    "biases",
                    "ratios %",
                    "size",
                    "backbone",
                    "test set",
                    "source",
                ],
                tablefmt="github",
            )
        )
    elif args.what == "trackers":
        from debias_bench.tracking import TRACKERS

        rows = [[e.name, e.display_name, f'pip install -e ".[{e.obj.extra}]"'] for e in TRACKERS]
        print(tabulate(rows, headers=["name", "--track", "install"], tablefmt="github"))
    else:
        for name, values in PRESETS.items():
            print(f"{name:8s} {values or '(method defaults: the official configurations)'}")
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    lst = sub.add_parser("list", help="registered methods, datasets, presets or trackers")
    lst.add_argument("what", choices=["methods", "datasets", "presets", "trackers"])
    lst.set_defaults(func=cmd_list)
