"""`bench list`: what is registered (built-in and from ``BENCH_PLUGINS``), with its metadata.

Each list imports only the registry it shows (:func:`_provided`), when it runs: the launchers,
tables and trackers bring torch, pandas and the run store with them, and ``bench list
selections`` (or ``bench list --help``) needs none of that."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from tabulate import tabulate

from debias_bench.config.selection import (
    LOWER_IS_BETTER,
    REQUIRED_SELECTIONS,
    SELECTED_BY,
    SELECTIONS,
)
from debias_bench.plugins.loading import origin
from debias_bench.registry import DATASETS, METHODS


def _provided(module: str, name: str) -> Any:
    """``name`` of ``module``, imported now (the module registers what it provides)."""
    return getattr(importlib.import_module(module), name)


def _table(rows: list[list[object]], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="github")


def list_methods() -> str:
    rows: list[list[object]] = [
        [
            e.name,
            e.display_name,
            "yes" if e.meta.get("needs_bias_labels") else "no",
            e.meta.get("cost", ""),
            e.citation,
        ]
        for e in METHODS
    ]
    return _table(rows, ["name", "paper name", "bias labels", "cost", "citation"])


def list_datasets() -> str:
    rows: list[list[object]] = []
    for e in DATASETS:
        s = e.obj.spec
        rows.append(
            [
                e.name,
                e.display_name,
                s.num_classes,
                s.num_biases,
                ", ".join(f"{r:g}" for r in s.ratios),
                s.size_text,
                s.backbone,
                s.test_kind,
                e.citation,
            ]
        )
    headers = ["name", "paper name", "classes", "biases", "ratios %", "size HxW", "backbone"]
    return _table(rows, [*headers, "test set", "source"])


def list_presets() -> str:
    """Each preset's engine-wide values, then what each dataset adds to it (declared on its
    family or taken from its recipe: ``debias_bench.data.facts``)."""
    presets = _provided("debias_bench.config.run_config", "PRESETS")
    preset_hparams = _provided("debias_bench.data.facts", "preset_hparams")
    preset_data_options = _provided("debias_bench.data.facts", "preset_data_options")
    lines = []
    for name, values in presets.items():
        lines.append(f"{name:8s} {values or '(method defaults: the official configurations)'}")
        for dataset in DATASETS.names():
            added: dict[str, Any] = {}
            for _, layer in preset_hparams(name, dataset):
                added.update(layer)
            options = preset_data_options(name, dataset)
            if added or options:
                data = f"  data options {options}" if options else ""
                lines.append(f"  {dataset:14s} {added}{data}")
    return "\n".join(lines)


def list_trackers() -> str:
    trackers = _provided("debias_bench.tracking", "TRACKERS")
    rows: list[list[object]] = [
        [e.name, e.display_name, f'pip install -e ".[{e.obj.extra}]"'] for e in trackers
    ]
    return _table(rows, ["name", "--track", "install"])


def list_launchers() -> str:
    from .flags import launcher_flags  # imports the launchers' stage

    launchers = _provided("debias_bench.launchers.factories", "LAUNCHERS")
    rows: list[list[object]] = [
        [
            e.name,
            e.display_name,
            " ".join(flag for flag, _ in launcher_flags(e.obj).values()),
            origin(e.obj.__module__),
        ]
        for e in launchers
    ]
    return _table(rows, ["--launcher", "runs execute", "its flags", "from"])


def list_selections() -> str:
    rows: list[list[object]] = []
    for name in SELECTIONS:
        split, metric = SELECTED_BY.get(name, ("", ""))
        most = "min" if metric in LOWER_IS_BETTER else "max"
        picks = f"{most} {split} {metric}" if split else "the final evaluation"
        rows.append([name, picks, "yes" if name in REQUIRED_SELECTIONS else "newer runs"])
    return _table(rows, ["--selection", "picks the evaluation with", "in every result"])


def list_tables() -> str:
    tables = _provided("debias_bench.reporting", "TABLES")
    rows: list[list[object]] = [
        [
            e.name,
            e.display_name,
            "yes" if e.meta.get("in_all") else "",
            origin(e.obj.__module__),
        ]
        for e in tables
    ]
    return _table(rows, ["--table", "what it shows", "in --table all", "from"])


#: what `bench list WHAT` prints; the registries are read when it runs (plugins included)
LISTS: dict[str, Callable[[], str]] = {
    "methods": list_methods,
    "datasets": list_datasets,
    "presets": list_presets,
    "trackers": list_trackers,
    "launchers": list_launchers,
    "selections": list_selections,
    "tables": list_tables,
}


def cmd_list(args: argparse.Namespace) -> int:
    print(LISTS[args.what]())
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    lst = sub.add_parser("list", help=f"what is registered: {', '.join(LISTS)}")
    lst.add_argument("what", choices=list(LISTS))
    lst.set_defaults(func=cmd_list)
