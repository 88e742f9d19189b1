"""`bench perf`: steps per second and peak memory of each method on each dataset, next to a bare
PyTorch loop doing Vanilla's training on the same tensors, and the paper grid's projected time.

How cells are measured (synthetic data, subprocesses, the timed window, the budget) is described
in ``debias_bench.perf.speed``, the cost model in ``debias_bench.perf.projection``. Here: the plan
of cells,
the command and the JSON; the tables are drawn by ``perf_tables``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from debias_bench import paths
from debias_bench.config.run_config import PROTOCOLS, RunConfig, parse_overrides
from debias_bench.errors import ConfigError
from debias_bench.paths import DataPlace
from debias_bench.perf.cells import run_cell_isolated
from debias_bench.perf.overhead import launcher_overhead
from debias_bench.perf.projection import PAPER_SEEDS, Projection, project
from debias_bench.perf.speed import BARE, Cell, Measurement, describe_device
from debias_bench.perf.tables import (
    TARGET,
    Key,
    harness_vs_bare,
    render_comparison,
    render_projection,
    render_sync_table,
    render_table,
    summarise,
)
from debias_bench.perf.tracking_cost import RUN, track_overhead
from debias_bench.plugins.loading import plugins_for
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.jsonio import write_output
from debias_bench.session.execute import handling
from debias_bench.training.devices import resolve_device

from .common import data_args


def plan_cells(datasets: list[str], methods: list[str], repeats: int, **common: Any) -> list[Cell]:
    """Per dataset: the bare loop and harness Vanilla alternately ``repeats`` times each (so
    drifting machine load hits both alike), then every other method once."""
    cells = []
    for dataset in datasets:
        for _ in range(repeats):
            cells += [Cell(dataset, BARE, **common), Cell(dataset, "vanilla", **common)]
        cells += [Cell(dataset, m, **common) for m in methods if m != "vanilla"]
    return cells


def run_plan(
    cells: list[Cell],
    report: Callable[[str], None] = lambda line: None,
    timeout_s: float | None = None,
) -> list[Measurement]:
    """Measure every cell in its own process (stopped after ``timeout_s``), reporting a line
    per finished cell. Ctrl-C or SIGTERM (a job's time limit) ends the plan early: the cells
    measured so far are returned, so what they cost is not lost. The handler covers the whole
    plan, reports included: a signal between two cells must not kill the process either."""
    found: list[Measurement] = []
    seen: dict[Key, int] = {}
    try:
        with handling([signal.SIGTERM], signal.default_int_handler):
            for i, cell in enumerate(cells, 1):
                key = (cell.dataset, cell.method)
                seen[key] = seen.get(key, 0) + 1
                started = time.perf_counter()
                found.append(run_cell_isolated(cell, timeout_s))
                took = time.perf_counter() - started
                report(f"[{i}/{len(cells)}] {_cell_line(cell, found[-1], seen[key], took)}")
    except KeyboardInterrupt:
        report(
            f"stopped after {_plural(len(found), 'cell')} of {len(cells)}: what follows covers "
            "those"
        )
    return found


def _cell_line(cell: Cell, m: Measurement, repeat: int, took: float) -> str:
    """A finished cell's progress line (after its ``[i/n]``)."""
    nth = f" #{repeat}" if cell.method in (BARE, "vanilla") else ""
    what = m.error or f"{m.ms_per_step:.1f} ms/step over {m.timed_steps} steps, {m.peak_mb:.0f} MB"
    return f"{cell.dataset} {cell.method}{nth}: {what} ({took:.0f} s)"


def render_notes(args: argparse.Namespace, memory: str) -> list[str]:
    budget = f", fewer where the {args.budget:g} s budget ran out" if args.budget else ""
    return [
        f"timed: at least {_plural(args.steps, 'step')} and {args.min_time:g} s per cell after "
        f"{args.warmup} warmup{budget}; "
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


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def _load_note(device: torch.device, threads: int) -> str | None:
    """A warning when other processes keep the cores busy that the cells' threads need."""
    if device.type != "cpu" or not hasattr(os, "getloadavg"):
        return None
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load + threads <= cores + 0.25:
        return None
    return (
        f"note: load average {load:.1f} on {cores} cores before starting, and each cell uses "
        f"{_plural(threads, 'thread')}: timings will be noisy (--threads N below the idle cores "
        "helps)"
    )


def _check(args: argparse.Namespace) -> None:
    for name in ("steps", "repeats", "devices"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name} must be at least 1")
    for name in ("warmup", "budget", "min_time", "cell_timeout"):
        if (getattr(args, name) or 0) < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must not be negative")
    if args.batch_size is not None and args.batch_size < 1:
        raise ConfigError("--batch-size must be at least 1")
    if args.threads is not None and args.threads < 1:
        raise ConfigError("--threads must be at least 1")
    if args.cuda_sync_debug and not args.host_syncs:
        raise ConfigError("--cuda-sync-debug checks --host-syncs", hint="add --host-syncs")
    if args.project and args.batch_size:
        raise ConfigError(
            "--project needs the paper batch sizes", hint="drop --batch-size to project the grid"
        )


def _measurement_place(args: argparse.Namespace, what: str) -> DataPlace:
    """The data place of an overhead measurement of ``--runs`` runs, announced as ``what``."""
    if args.runs < 1:
        raise ConfigError("--runs must be at least 1")
    place = DataPlace(paths.raw_root(args.raw_root), paths.data_root(args.data_root))
    print(f"bench perf: {what}", file=sys.stderr)
    return place


def cmd_launcher_overhead(args: argparse.Namespace) -> int:
    """``--launcher-overhead``: warm and cold workers' cost per run
    (``debias_bench.perf.overhead``)."""

    place = _measurement_place(
        args, f"{args.runs} tiny Colored MNIST runs through the local launcher (1 worker), "
        "warm then cold workers",
    )  # fmt: skip
    results = launcher_overhead(args.runs, place)
    for result in results:
        print(result.line())
    return 1 if any(r.failed for r in results) else 0


def cmd_track_overhead(args: argparse.Namespace) -> int:
    """``--track-overhead``: the throughput a tracker costs
    (``debias_bench.perf.tracking_cost``)."""

    place = _measurement_place(
        args, f"{args.runs} pairs of Colored MNIST runs ({RUN['steps']} steps, an evaluation "
        f"every {RUN['eval_every']}), without and with --track {args.track_overhead}",
    )  # fmt: skip
    result = track_overhead(args.runs, place, args.track_overhead)
    print(result.line())
    return 1 if result.failed else 0


def cmd_perf(args: argparse.Namespace) -> int:
    if args.launcher_overhead:
        return cmd_launcher_overhead(args)
    if args.track_overhead:
        return cmd_track_overhead(args)
    _check(args)
    device = _device(args)
    if args.cuda_sync_debug and device.type != "cuda":
        raise ConfigError(
            f"--cuda-sync-debug is PyTorch's CUDA check; this measures on {device.type}",
            hint="--device cuda, or --host-syncs alone (which counts on any device)",
        )
    if args.host_syncs:
        return cmd_host_syncs(args, device)
    cells = _cells(args, device)
    where = describe_device(device, args.threads)
    print(f"bench perf: {len(cells)} cells on {where}, one process each", file=sys.stderr)
    note = _load_note(device, args.threads or torch.get_num_threads())
    if note:
        print(note, file=sys.stderr)

    measurements = run_plan(
        cells, lambda line: print(line, file=sys.stderr, flush=True), args.cell_timeout or None
    )
    rows = summarise(measurements)
    comparison = harness_vs_bare(measurements)
    projection = _projection(rows, args)
    memory = next((m.memory for m in measurements if m.memory), "peak RSS")

    print(f"device: {where}; torch {torch.__version__}; protocol {args.protocol}{_sets(args)}")
    print(render_table(rows, rss=memory == "peak RSS"))
    print()
    for line in render_comparison(comparison, args.repeats) + render_notes(args, memory):
        print(line)
    if not args.batch_size:
        print("\n".join(render_projection(projection, args.project)))
    if args.json:
        write_json(
            Path(args.json),
            args,
            where,
            device,
            measurements,
            rows,
            comparison,
            projection,
            len(cells),
        )
        print(f"measurements written to {args.json}", file=sys.stderr)
    if len(measurements) < len(cells):
        print(
            f"stopped: {len(measurements)} of {len(cells)} cells measured; the tables above "
            "cover those only",
            file=sys.stderr,
        )
        return 130
    failed = [m for m in measurements if m.error and not m.error.startswith("skipped")]
    return 1 if failed else 0


def _sets(args: argparse.Namespace) -> str:
    """``; --set amp=bf16`` for the header line, when ``--set`` was given."""
    return "".join(f"; --set {item}" for item in args.set or [])


def _device(args: argparse.Namespace) -> torch.device:
    device = resolve_device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def cmd_host_syncs(args: argparse.Namespace, device: torch.device) -> int:
    """``--host-syncs``: each method's host synchronisations per training step
    (``debias_bench.perf.host_syncs``), counted over the steps after the warmup; evaluation,
    the only place the engine copies its metrics to the host (once per interval), is outside
    that window. Every method once, no bare loop, no timing."""
    cells = [
        dataclasses.replace(c, host_syncs=True, sync_debug=args.cuda_sync_debug, min_time_s=0.0)
        for c in _cells(args, device)
        if c.method != BARE
    ]
    cells = list({(c.dataset, c.method): c for c in cells}.values())  # Vanilla once
    where = describe_device(device, args.threads)
    print(f"bench perf: host syncs of {len(cells)} cells on {where}", file=sys.stderr)
    measurements = run_plan(
        cells, lambda line: print(line, file=sys.stderr, flush=True), args.cell_timeout or None
    )
    rows = summarise(measurements)
    print(f"device: {where}; torch {torch.__version__}; protocol {args.protocol}{_sets(args)}")
    print(render_sync_table(rows))
    print(
        f"\ncounted: every training step after {args.warmup} warmup (at most {args.steps}; fewer "
        f"where the {args.budget:g} s budget ran out): batch, update, the engine's bookkeeping; "
        "not counted: construction, preparation stages, evaluation and logging (once per "
        "interval). On a CPU every tensor counts as a device tensor."
    )
    if args.json:
        data = {
            "mode": "host_syncs",
            "device": where,
            "device_type": device.type,
            "torch": torch.__version__,
            "protocol": args.protocol,
            "steps": args.steps,
            "warmup": args.warmup,
            "set": parse_overrides(args.set),
            "cuda_sync_debug": args.cuda_sync_debug,
            "measurements": [m.to_dict() for m in measurements],
            "summary": rows,
        }
        write_output(Path(args.json), json.dumps(data, indent=2) + "\n", "--json")
        print(f"measurements written to {args.json}", file=sys.stderr)
    failed = [m for m in measurements if m.error and not m.error.startswith("skipped")]
    return 130 if len(measurements) < len(cells) else 1 if failed else 0


def _cells(args: argparse.Namespace, device: torch.device) -> list[Cell]:
    """The cells ``bench perf`` measures: each method on each dataset, one process a cell."""
    methods = METHODS.resolve(args.methods)
    datasets = DATASETS.resolve(args.datasets)
    plugins, sys_path = plugins_for(RunConfig(m, d, 0.0, 0) for d in datasets for m in methods)
    return plan_cells(
        datasets,
        methods,
        args.repeats,
        steps=args.steps,
        warmup=args.warmup,
        protocol=args.protocol,
        device=str(device),
        batch_size=args.batch_size,
        threads=args.threads,
        budget_s=args.budget or None,
        min_time_s=args.min_time,
        plugins=tuple(plugins),
        sys_path=tuple(sys_path),
        sets=tuple(parse_overrides(args.set).items()),
    )


def _projection(rows: list[dict[str, Any]], args: argparse.Namespace) -> Projection:
    """The paper grid's time projected from the measured rows (the bare loop aside); a cell
    that could not be measured is left out with a note."""
    measured = [r for r in rows if r["method"] != BARE]
    timed = {(r["dataset"], r["method"]): r["ms_per_step"] for r in measured if r["ms_per_step"]}
    projection = project(timed, args.protocol, PAPER_SEEDS, args.devices)
    projection.notes += [
        f"{r['dataset']} {r['method']}: not measured ({r['error']}), left out"
        for r in measured
        if not r["ms_per_step"] and r["error"]
    ]
    return projection


def write_json(
    path: Path,
    args: argparse.Namespace,
    where: str,
    device: torch.device,
    measurements: list[Measurement],
    rows: list[dict[str, Any]],
    comparison: dict[str, dict[str, float]],
    projection: Projection,
    planned: int,
) -> None:
    data = {
        "device": where,
        "device_type": device.type,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": args.threads or torch.get_num_threads(),
        "protocol": args.protocol,
        "steps": args.steps,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "budget_s": args.budget or None,
        "min_time_s": args.min_time,
        "cell_timeout_s": args.cell_timeout or None,
        "batch_size_override": args.batch_size,
        "set": parse_overrides(args.set),
        "target_speed": TARGET,
        "cells_planned": planned,  # more than len(measurements): stopped early
        "measurements": [m.to_dict() for m in measurements],
        "summary": rows,
        "harness_vs_bare": comparison,
        "projection": None if args.batch_size else projection.to_dict(),
    }
    write_output(path, json.dumps(data, indent=2) + "\n", "--json")


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "perf",
        help="steps/s and peak memory of each method vs a bare PyTorch loop; the grid's cost",
        description="Measure, on this device, each method's training speed and peak memory on "
        "synthetic tensors shaped like each dataset (nothing to download), next to a bare "
        "PyTorch loop doing Vanilla's training, and project the paper grid's time.",
    )
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--methods", default="all", help="comma list or 'all' (Vanilla always runs)")
    p.add_argument("--datasets", default="all", help="comma list or 'all'")
    p.add_argument("--steps", type=int, default=20, help="timed steps per cell (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="bare loop and harness Vanilla, alternately, this many times each; medians "
        "reported (other methods run once; default 3)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=20.0,
        help="seconds: a cell's timed window ends after this long and its warmup after a "
        "quarter of it, at least one step each (slow CPU cells); 0: no limit (default 20)",
    )
    p.add_argument(
        "--min-time",
        type=float,
        default=2.0,
        help="seconds: time more than --steps steps until the window lasts this long, so "
        "millisecond steps are timed over many (default 2)",
    )
    p.add_argument(
        "--cell-timeout",
        type=float,
        default=900.0,
        help="seconds: stop a cell's process after this long and report it (SelecMix's "
        "auxiliary CIFAR ResNet-18 on 224-px images takes over 15 min a step on a CPU, and "
        "17 GB); 0: no limit (default 900)",
    )
    p.add_argument("--batch-size", type=int, help="one batch size for every cell")
    p.add_argument("--threads", type=int, help="CPU threads of every cell (default: torch's)")
    p.add_argument("--protocol", default="official", choices=list(PROTOCOLS))
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a hyperparameter of every cell (repeatable), e.g. --set amp=bf16; the "
        "bare loop keeps float32",
    )
    p.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    p.add_argument(
        "--project", action="store_true", help="the paper grid's projected time, per cell"
    )
    p.add_argument(
        "--devices", type=int, default=1, help="project the grid on this many devices too"
    )
    p.add_argument(
        "--host-syncs",
        action="store_true",
        help="instead of timing: count each method's host synchronisations per training step "
        "(.item(), float() of a tensor, .tolist(), copies to the host, boolean masks, unique, "
        "nonzero, ...: what makes the host wait for a GPU); on a CPU too",
    )
    p.add_argument(
        "--cuda-sync-debug",
        action="store_true",
        help="with --host-syncs on CUDA: the counted steps also under PyTorch's "
        'torch.cuda.set_sync_debug_mode("error"), so a step that syncs fails its cell',
    )
    p.add_argument(
        "--launcher-overhead",
        action="store_true",
        help="instead: the local launcher's cost per run (wall time minus training time of "
        "tiny Colored MNIST runs), warm workers next to cold ones",
    )
    p.add_argument(
        "--track-overhead",
        metavar="KIND[=TARGET]",
        help="instead: what --track KIND costs a run (steps/s over the whole run, tracked "
        "against untracked, in alternating pairs of short Colored MNIST runs)",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=6,
        help="--launcher-overhead: runs per mode; --track-overhead: pairs (default 6)",
    )
    data_args(p)
    p.set_defaults(func=cmd_perf)
