"""`bench run`: train a grid of runs, skipping the ones already done.

Where the runs execute is the launcher's business (``--launcher inline|local|slurm|a plugin's``,
see :mod:`.execute`); this module parses the command line, expands the grid and prints the
summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tabulate import tabulate

from debias_bench import paths
from debias_bench.analysis.ablations import ABLATIONS, ablation_grids, get_ablation
from debias_bench.analysis.tuning_report import check_tuned_cells, tuned_values
from debias_bench.config.flags import MAX_SEED, hparam_flag, number
from debias_bench.config.grid import Grid, expand, grid_size, large_grid_warning
from debias_bench.config.run_config import PRESETS, PROTOCOLS, parse_overrides
from debias_bench.config.terms import sweep_note
from debias_bench.launchers.preflight import check_path, check_seeds, unique
from debias_bench.launchers.run_one import Outcome
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.states import SUCCESS, RunState
from debias_bench.runs.store import RunStore

from .common import data_args, floats, fmt, ints, short_note
from .execute import execute, execution_args


def _row(o: Outcome) -> list[Any]:
    sel = (o.result or {}).get("selections", {})
    last, best = sel.get("last", {}).get("test", {}), sel.get("best_valid", {}).get("test", {})
    return [
        o.config.method,
        o.config.dataset,
        f"{o.config.ratio:g}",
        o.config.seed,
        o.state,
        fmt(last.get("accuracy")),
        fmt(last.get("conflicting_accuracy")),
        fmt(best.get("accuracy")),
        fmt((o.result or {}).get("train_time_s")),
        short_note(o.note.replace(f"{o.config.run_id} ", "")),  # the row says which run
    ]


def not_started(outcomes: list[Outcome]) -> list[Outcome]:
    """The runs the sweep did not start (pending: it stopped first, or never got to them)."""
    return [o for o in outcomes if o.state is RunState.PENDING and not o.ran]


def summary(outcomes: list[Outcome]) -> str:
    """The final table: a row per run, except the runs not started (a stopped sweep of many
    runs), which are one line under it."""
    pending = not_started(outcomes)
    shown = [o for o in outcomes if not (o.state is RunState.PENDING and not o.ran)]
    headers = [
        "method",
        "dataset",
        "ratio",
        "seed",
        "state",
        "test acc",
        "conflicting",
        "test acc (best valid)",
        "time s",
        "note",
    ]
    text = tabulate([_row(o) for o in shown], headers=headers, tablefmt="github") if shown else ""
    if pending:
        runs = "run" if len(pending) == 1 else "runs"
        line = f"{len(pending)} {runs} not started (pending): rerun the same command to start them"
        text = f"{text}\n{line}" if text else line
    return text


def ran_line(outcomes: list[Outcome]) -> str:
    """``5 ran, 0 failed, 1 interrupted``: what this sweep trained and how the runs that are
    not done ended (interrupted, dead: a rerun resumes them)."""
    failed = sum(o.state is RunState.FAILED for o in outcomes)
    text = f"{sum(o.ran for o in outcomes)} ran, {failed} failed"
    for state in (RunState.INTERRUPTED, RunState.DEAD):
        n = sum(o.state is state for o in outcomes)
        if n:
            text += f", {n} {state}"
    return text


def cmd_run(args: argparse.Namespace) -> int:
    check_path(Path(args.out), "--out")  # --dry-run too: a path no file system takes
    tuned: dict[tuple[str, str, float], dict[str, Any]] = {}
    if args.hparams:  # checked: types, duplicates, protocol (debias_bench.analysis.tuning_report)
        tuned, tuned_notes = tuned_values(args.hparams, args.protocol, args.preset)
        for note in tuned_notes:
            print(f"note: {note}", file=sys.stderr)
    grid = Grid(
        methods=list(dict.fromkeys(METHODS.resolve(args.methods))),
        datasets=list(dict.fromkeys(DATASETS.resolve(args.datasets))),
        ratios=unique(floats(args.ratios)) if args.ratios else None,
        seeds=check_seeds(ints(args.seeds)),
        protocol=args.protocol,
        preset=args.preset,
        epochs=args.epochs,
        overrides=parse_overrides(args.set),
        data_options={"data_seed": args.data_seed, **parse_overrides(args.data_option)},
        tuned=tuned,
    )
    configs, notes = [], []
    grids = ablation_grids(get_ablation(args.ablation), grid) if args.ablation else [grid]
    for one in grids:
        more, more_notes = expand(one)
        configs += more
        notes += [n for n in more_notes if n not in notes]
    configs = list({c.run_id: c for c in configs}.values())  # grids of an ablation overlap
    if args.hparams:
        check_tuned_cells(
            tuned, [(c.method, c.dataset, float(c.ratio)) for c in configs], args.hparams
        )
    terms = sweep_note(configs)  # a method fed other inputs than the baselines, say
    for note in [*notes, *([terms] if terms else [])]:
        print(f"note: {note}", file=sys.stderr)
    large = large_grid_warning(configs)  # before the sweep makes a folder for each run
    if large:
        print(f"warning: {large}", file=sys.stderr)
    store = RunStore(Path(args.out))
    if args.dry_run:
        done = 0
        for c in configs:
            done += (finished := store.run(c.run_id).is_done())
            print(f"{RunState.DONE.value if finished else 'todo'}  {c.run_id}")
        print(f"{grid_size(configs)}: {len(configs) - done:,} todo, {done:,} done", file=sys.stderr)
        return 0
    overall = time.perf_counter()
    sweep, signum = execute(args, configs, store)
    outcomes = sweep.outcomes
    print(summary(outcomes))
    failed = sum(o.state is RunState.FAILED for o in outcomes)
    print(
        f"\n{ran_line(outcomes)}, in {time.perf_counter() - overall:.0f} s; "
        f"results in {store.root}",
        file=sys.stderr,
    )
    if failed:
        print(f"see the errors with `bench status --out {store.root} --failed`", file=sys.stderr)
    if sweep.stopped and sweep.stopped.startswith("detached"):
        print(sweep.stopped.removeprefix("detached: "), file=sys.stderr)
        return 0 if signum is None else 128 + signum
    if signum is not None:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return 128 + signum
    return exit_code(outcomes, len(configs))


def exit_code(outcomes: list[Outcome], planned: int) -> int:
    """0 only when every run of the grid is done (or skipped by its method, with a reason);
    1 when any failed, diverged, was interrupted, is held by another process or never ran."""
    unfinished = [o for o in outcomes if o.state not in SUCCESS]
    if unfinished or len(outcomes) < planned:
        states = Counter(str(o.state) for o in unfinished)
        if len(outcomes) < planned:
            states["not started"] = planned - len(outcomes)
        text = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        print(f"not every run is done ({text}): exit code 1", file=sys.stderr)
        return 1
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="train a grid of runs (skips the ones already done)")
    run.add_argument(
        "--methods",
        default="vanilla,etf_debias",
        help=f"comma list or 'all' of: {', '.join(METHODS.names())}",
    )
    run.add_argument(
        "--datasets",
        default="cmnist",
        help=f"comma list or 'all' of: {', '.join(DATASETS.names())}",
    )
    run.add_argument("--ratios", help="bias-conflicting %% (default: each dataset's ratios)")
    run.add_argument("--seeds", default="0", help="comma list, e.g. 0,1,2")
    run.add_argument(
        "--hparams",
        metavar="TUNED_YAML",
        help="per-cell values chosen by `bench tune` (DIR/tuned.yaml); --set still wins",
    )
    config_args(run)
    run.add_argument("--out", default=str(paths.DEFAULT_OUT), help="run store directory")
    run.add_argument(
        "--ablation",
        choices=list(ABLATIONS),
        help="add the paper's ablation axis: alpha (0..1) or prime (etf, random); "
        "plot with `bench analyze ablation NAME`",
    )
    run.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    execution_args(run)
    run.set_defaults(func=cmd_run)


def config_args(run: argparse.ArgumentParser) -> None:
    """How each run of a grid is configured: preset, protocol, overrides, device, data
    (shared by ``bench run`` and ``bench tune``)."""
    run.add_argument("--preset", default="paper", choices=list(PRESETS))
    run.add_argument(
        "--protocol",
        default="official",
        choices=list(PROTOCOLS),
        help="official: keep the official code's quirks; clean: drop them",
    )
    run.add_argument(
        "--epochs", type=hparam_flag("epochs", "--epochs"), help="override the training length"
    )
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a hyperparameter (repeatable), e.g. --set lr=1e-3",
    )
    run.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    run.add_argument(
        "--data-seed", type=number("int", 0, MAX_SEED), default=0, help="seed of the dataset build"
    )
    run.add_argument(
        "--data-option",
        action="append",
        metavar="KEY=VALUE",
        help="dataset build/read option (repeatable), e.g. corruptions=type0, severity=4, "
        "source=imported; datasets without the option ignore it",
    )
    data_args(run)
