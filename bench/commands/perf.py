"""`bench perf`: steps per second and peak memory of each method on each dataset, next to a bare
PyTorch loop doing Vanilla's training on the same tensors, and the paper grid's projected time.

How cells are measured (synthetic data, subprocesses, the timed window, the budget) is described
in ``debias_bench.perf.speed``, the cost model in ``debias_bench.perf.projection``. Here: the
command, its flags and their checks, and running the plan of cells under the command's signal
handling. The plan and its progress lines are in ``debias_bench.perf.plan``, the tables in
``debias_bench.perf.tables``, the notes, the projection and the JSON in
``debias_bench.perf.results``.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from debias_bench import paths
from debias_bench.config.run_config import PROTOCOLS, RunConfig, parse_overrides
from debias_bench.errors import ConfigError
from debias_bench.paths import DataPlace
from debias_bench.perf.cells import run_cell_isolated
from debias_bench.perf.measurement import BARE, Cell, Measurement, describe_device
from debias_bench.perf.overhead import launcher_overhead
from debias_bench.perf.plan import cell_line, load_note, plan_cells, plural
from debias_bench.perf.results import (
    PerfSettings,
    measured_projection,
    render_notes,
    sync_note,
    write_json,
    write_sync_json,
)
from debias_bench.perf.tables import (
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
from debias_bench.session.execute import handling
from debias_bench.training.devices import resolve_device

from .common import data_args


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
                report(f"[{i}/{len(cells)}] {cell_line(cell, found[-1], seen[key], took)}")
    except KeyboardInterrupt:
        report(
            f"stopped after {plural(len(found), 'cell')} of {len(cells)}: what follows covers those"
        )
    return found


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
    settings = _settings(args)
    cells = _cells(args, device)
    where = describe_device(device, args.threads)
    print(f"bench perf: {len(cells)} cells on {where}, one process each", file=sys.stderr)
    note = load_note(device, args.threads or torch.get_num_threads())
    if note:
        print(note, file=sys.stderr)

    measurements = run_plan(
        cells, lambda line: print(line, file=sys.stderr, flush=True), args.cell_timeout or None
    )
    rows = summarise(measurements)
    comparison = harness_vs_bare(measurements)
    projection = measured_projection(rows, settings)
    memory = next((m.memory for m in measurements if m.memory), "peak RSS")

    print(f"device: {where}; torch {torch.__version__}; protocol {args.protocol}{_sets(args)}")
    print(render_table(rows, rss=memory == "peak RSS"))
    print()
    for line in render_comparison(comparison, args.repeats) + render_notes(settings, memory):
        print(line)
    if not args.batch_size:
        print("\n".join(render_projection(projection, args.project)))
    if args.json:
        write_json(
            Path(args.json),
            settings,
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
    settings = _settings(args)
    print(sync_note(settings))
    if args.json:
        write_sync_json(Path(args.json), settings, where, device, measurements, rows)
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


def _settings(args: argparse.Namespace) -> PerfSettings:
    """The flags the notes and the JSON record."""
    return PerfSettings(
        protocol=args.protocol,
        steps=args.steps,
        warmup=args.warmup,
        repeats=args.repeats,
        budget=args.budget,
        min_time=args.min_time,
        cell_timeout=args.cell_timeout,
        batch_size=args.batch_size,
        threads=args.threads,
        devices=args.devices,
        set=args.set,
        cuda_sync_debug=args.cuda_sync_debug,
    )


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
