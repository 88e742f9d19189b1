"""The cells ``bench perf`` measures, and what it says while it measures them: the plan (per
dataset the bare loop and harness Vanilla alternately, then every other method once), a
finished cell's progress line, and a warning when other processes keep busy the cores the
cells' threads need. Measuring a cell: :mod:`debias_bench.perf.cells`.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from debias_bench.perf.measurement import BARE, Cell, Measurement


def plan_cells(datasets: list[str], methods: list[str], repeats: int, **common: Any) -> list[Cell]:
    """Per dataset: the bare loop and harness Vanilla alternately ``repeats`` times each (so
    drifting machine load hits both alike), then every other method once."""
    cells = []
    for dataset in datasets:
        for _ in range(repeats):
            cells += [Cell(dataset, BARE, **common), Cell(dataset, "vanilla", **common)]
        cells += [Cell(dataset, m, **common) for m in methods if m != "vanilla"]
    return cells


def cell_line(cell: Cell, m: Measurement, repeat: int, took: float) -> str:
    """A finished cell's progress line (after its ``[i/n]``)."""
    nth = f" #{repeat}" if cell.method in (BARE, "vanilla") else ""
    what = m.error or f"{m.ms_per_step:.1f} ms/step over {m.timed_steps} steps, {m.peak_mb:.0f} MB"
    return f"{cell.dataset} {cell.method}{nth}: {what} ({took:.0f} s)"


def plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def load_note(device: torch.device, threads: int) -> str | None:
    """A warning when other processes keep the cores busy that the cells' threads need."""
    if device.type != "cpu" or not hasattr(os, "getloadavg"):
        return None
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load + threads <= cores + 0.25:
        return None
    return (
        f"note: load average {load:.1f} on {cores} cores before starting, and each cell uses "
        f"{plural(threads, 'thread')}: timings will be noisy (--threads N below the idle cores "
        "helps)"
    )
