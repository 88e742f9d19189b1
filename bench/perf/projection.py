"""The paper grid's time from measured speeds (``bench perf --project``).

A run of the paper configuration takes ``steps x ms/step``, where ``steps`` is the
configuration's ``steps`` when set, else ``epochs x ceil(train size / batch size)`` with
the training-set size the dataset declares (``DatasetFamily.train_sizes``, never its recipe's);
the grid is the sum over datasets x methods x ratios x seeds. Runs are independent and each
uses one device, so N devices take ``max(total / N, longest run)``. Not included:
evaluation (every epoch in the paper configurations), preparation stages (LfF+BE's
committee: 5 x 1,000 steps plus scoring), dataset builds and process start-up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from debias_bench.config.run_config import RunRequest, resolve_layers
from debias_bench.config.run_length import steps_of
from debias_bench.registry import DATASETS

#: the paper grid's seeds per (method, dataset, ratio)
PAPER_SEEDS = 3


def run_steps(method: str, dataset: str, ratio: float, protocol: str = "official") -> int | None:
    """Training steps of one paper-configuration run (None: training-set size unknown)."""
    values = resolve_layers(RunRequest(method, dataset, ratio, protocol=protocol)).values
    return steps_of(values, dataset, ratio)


@dataclass
class ProjectedCell:
    """The paper grid's share of one (dataset, method): its runs and their time."""

    dataset: str
    method: str
    ms_per_step: float
    steps_per_run: list[int]  # one entry per ratio
    seeds: int

    @property
    def runs(self) -> int:
        return len(self.steps_per_run) * self.seeds

    @property
    def run_seconds(self) -> list[float]:
        return [s * self.ms_per_step / 1000.0 for s in self.steps_per_run]

    @property
    def total_seconds(self) -> float:
        return sum(self.run_seconds) * self.seeds


@dataclass
class Projection:
    """The paper grid's time on ``devices`` devices from measured ms/step."""

    cells: list[ProjectedCell]
    devices: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def total_seconds(self) -> float:
        return sum(c.total_seconds for c in self.cells)

    @property
    def longest_run_seconds(self) -> float:
        return max((max(c.run_seconds, default=0.0) for c in self.cells), default=0.0)

    def seconds_on(self, devices: int) -> float:
        """Wall time on ``devices`` devices: even division, never below the longest run."""
        if not self.cells:
            return 0.0
        return max(self.total_seconds / max(devices, 1), self.longest_run_seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": self.devices,
            "seeds": self.cells[0].seeds if self.cells else PAPER_SEEDS,
            "total_seconds_1_device": self.total_seconds,
            "seconds_on_devices": self.seconds_on(self.devices),
            "longest_run_seconds": self.longest_run_seconds,
            "cells": [
                {**asdict(c), "runs": c.runs, "total_seconds": c.total_seconds} for c in self.cells
            ],
            "notes": self.notes,
            "excludes": "evaluation, preparation stages, dataset builds, process start-up",
        }


def project(
    ms_per_step: dict[tuple[str, str], float],
    protocol: str = "official",
    seeds: int = PAPER_SEEDS,
    devices: int = 1,
) -> Projection:
    """The paper grid of the measured (dataset, method) pairs: each at every ratio of its
    dataset, ``seeds`` seeds, ``steps x ms/step`` per run."""
    cells, notes = [], []
    for (dataset, method), ms in ms_per_step.items():
        ratios = DATASETS.get(dataset).spec.ratios
        steps = [run_steps(method, dataset, r, protocol) for r in ratios]
        if any(s is None for s in steps):
            notes.append(f"{dataset} {method}: training-set size unknown, left out")
            continue
        cells.append(ProjectedCell(dataset, method, ms, [int(s or 0) for s in steps], seeds))
    return Projection(cells, devices, notes)
