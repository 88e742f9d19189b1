"""What ``bench perf`` reports besides its tables (:mod:`debias_bench.perf.tables`): the
settings it measured with (:class:`PerfSettings`), the notes under the tables, the paper grid's
time projected from the measured rows, and the ``--json`` files.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from debias_bench.config.run_config import parse_overrides
from debias_bench.perf.measurement import BARE, Measurement
from debias_bench.perf.plan import plural
from debias_bench.perf.projection import PAPER_SEEDS, Projection, project
from debias_bench.perf.tables import TARGET
from debias_bench.runs.jsonio import write_output


@dataclass(frozen=True)
class PerfSettings:
    """What ``bench perf`` was asked for, as its notes and its JSON record it: its flags
    ``--protocol``, ``--steps``, ``--warmup``, ``--repeats``, ``--budget``, ``--min-time`` and
    ``--cell-timeout`` (seconds; 0: no limit), ``--batch-size`` and ``--threads`` (None: the
    paper configuration's, torch's), ``--devices`` (of the projection), the ``--set``
    ``KEY=VALUE`` items and ``--cuda-sync-debug``."""

    protocol: str
    steps: int
    warmup: int
    repeats: int
    budget: float
    min_time: float
    cell_timeout: float
    batch_size: int | None
    threads: int | None
    devices: int
    set: list[str] | None
    cuda_sync_debug: bool


def render_notes(settings: PerfSettings, memory: str) -> list[str]:
    budget = f", fewer where the {settings.budget:g} s budget ran out" if settings.budget else ""
    return [
        f"timed: at least {plural(settings.steps, 'step')} and {settings.min_time:g} s per cell "
        f"after {settings.warmup} warmup{budget}; "
        "outside "
        "the timed window: model construction, preparation stages (LfF+BE's committee), "
        "evaluation",
        "data: synthetic in-memory uint8 tensors shaped like each dataset; each method's paper "
        "configuration (its backbone and batch size; BAR's pretrained ResNet-18 from scratch)",
        "x Vanilla: time per step relative to harness Vanilla (SelecMix's step is one big batch "
        "of batch_size / mini_batch_size optimiser steps)",
        f"peak MB: {memory} of the cell's own process"
        + (" (over start: above its RSS after imports)" if memory == "peak RSS" else ""),
    ]


def sync_note(settings: PerfSettings) -> str:
    """What ``--host-syncs`` counted, under its table."""
    return (
        f"\ncounted: every training step after {settings.warmup} warmup (at most "
        f"{settings.steps}; fewer where the {settings.budget:g} s budget ran out): batch, update, "
        "the engine's bookkeeping; not counted: construction, preparation stages, evaluation and "
        "logging (once per interval). On a CPU every tensor counts as a device tensor."
    )


def measured_projection(rows: list[dict[str, Any]], settings: PerfSettings) -> Projection:
    """The paper grid's time projected from the measured rows (the bare loop aside); a cell
    that could not be measured is left out with a note."""
    measured = [r for r in rows if r["method"] != BARE]
    timed = {(r["dataset"], r["method"]): r["ms_per_step"] for r in measured if r["ms_per_step"]}
    projection = project(timed, settings.protocol, PAPER_SEEDS, settings.devices)
    projection.notes += [
        f"{r['dataset']} {r['method']}: not measured ({r['error']}), left out"
        for r in measured
        if not r["ms_per_step"] and r["error"]
    ]
    return projection


def _common(settings: PerfSettings, where: str, device: torch.device) -> dict[str, Any]:
    """What every ``--json`` file of ``bench perf`` says of where and how it measured."""
    return {
        "device": where,
        "device_type": device.type,
        "torch": torch.__version__,
        "protocol": settings.protocol,
        "steps": settings.steps,
        "warmup": settings.warmup,
        "set": parse_overrides(settings.set),
    }


def _write(path: Path, data: dict[str, Any]) -> None:
    write_output(path, json.dumps(data, indent=2) + "\n", "--json")


def write_json(
    path: Path,
    settings: PerfSettings,
    where: str,
    device: torch.device,
    measurements: list[Measurement],
    rows: list[dict[str, Any]],
    comparison: dict[str, dict[str, float]],
    projection: Projection,
    planned: int,
) -> None:
    data = {
        **_common(settings, where, device),
        "python": platform.python_version(),
        "threads": settings.threads or torch.get_num_threads(),
        "repeats": settings.repeats,
        "budget_s": settings.budget or None,
        "min_time_s": settings.min_time,
        "cell_timeout_s": settings.cell_timeout or None,
        "batch_size_override": settings.batch_size,
        "target_speed": TARGET,
        "cells_planned": planned,  # more than len(measurements): stopped early
        "measurements": [m.to_dict() for m in measurements],
        "summary": rows,
        "harness_vs_bare": comparison,
        "projection": None if settings.batch_size else projection.to_dict(),
    }
    _write(path, data)


def write_sync_json(
    path: Path,
    settings: PerfSettings,
    where: str,
    device: torch.device,
    measurements: list[Measurement],
    rows: list[dict[str, Any]],
) -> None:
    """``--host-syncs --json``: the counts of every cell and their summary rows."""
    data = {
        "mode": "host_syncs",
        **_common(settings, where, device),
        "cuda_sync_debug": settings.cuda_sync_debug,
        "measurements": [m.to_dict() for m in measurements],
        "summary": rows,
    }
    _write(path, data)
