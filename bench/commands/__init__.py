"""One module per `bench` sub-command, each with an ``add(subparsers)`` function.

:data:`COMMANDS` names each command's module and its one-line help without importing it: the
CLI imports a command's module only when that command runs or its ``--help`` is asked, so
``bench --help`` imports none of them (several import torch, pandas or scipy, seconds each).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Command:
    """A sub-command: its name, the module of this package that adds it (``add(sub)``) and
    the help line ``bench --help`` shows (the module's own, checked by the tests)."""

    name: str
    module: str
    help: str

    def load(self) -> ModuleType:
        return importlib.import_module(f"{__name__}.{self.module}")


COMMANDS = (
    Command("run", "run", "train a grid of runs (skips the ones already done)"),
    Command(
        "tune",
        "tune",
        "fair tuning: a seeded random search per method, chosen on validation, rerun",
    ),
    Command(
        "config",
        "config",
        "show every resolved hyperparameter of METHOD on DATASET and where it comes from",
    ),
    Command("status", "status", "states of the runs in a run store"),
    Command(
        "report",
        "report",
        "the paper's tables (LaTeX, Markdown, CSV, HTML) and plots from a run store",
    ),
    Command(
        "compare",
        "compare",
        "method A against B per cell: difference, interval, test, Holm p, seeds needed",
    ),
    Command(
        "regress", "regress", "record a sweep's metrics as a baseline, or check a sweep against one"
    ),
    Command(
        "reproduce",
        "reproduce",
        "train the paper's grid, export finished runs, compare with the paper",
    ),
    Command("track", "track", "experiment trackers: send a run store to them"),
    Command(
        "list",
        "listing",
        "what is registered: methods, datasets, presets, trackers, launchers, selections, tables",
    ),
    Command("data", "data", "prepare, verify and describe datasets"),
    Command("analyze", "analyze", "analyses of trained runs"),
    Command("viz", "viz", "visualisations of trained runs"),
    Command(
        "perf",
        "perf",
        "steps/s and peak memory of each method vs a bare PyTorch loop; the grid's cost",
    ),
)
