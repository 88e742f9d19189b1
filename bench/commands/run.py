"""`bench run`: train a grid of runs, skipping the ones already done.

Where the runs execute is the launcher's business (``--launcher inline|local|slurm``, see
``debias_bench.launchers``); this module parses the command line, expands the grid, writes the
sweep's plan into the run store (for ``bench status``), and prints the summary.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate
from tqdm import tqdm

from debias_bench import paths
from debias_bench.ablations import ABLATIONS, ablation_grids, get_ablation
from debias_bench.config import PRESETS, PROTOCOLS, RunConfig, parse_overrides
from debias_bench.engine import DataPlace, Progress
from debias_bench.grid import Grid, expand
from debias_bench.launchers import Sweep, schedule
from debias_bench.launchers.factories import LAUNCHERS, LaunchContext
from debias_bench.preflight import (
    check_data,
    check_data_root,
    check_device,
    check_out,
    check_path,
    check_seeds,
    check_worker_imports,
    unique,
)
from debias_bench.registry import DATASETS, METHODS
from debias_bench.reporting.tuned import check_tuned_cells, tuned_values
from debias_bench.runprogress import LogLines, eval_text
from debias_bench.states import SUCCESS, RunState
from debias_bench.store import RunStore
from debias_bench.sweep import MAX_ATTEMPTS, Outcome, plan, record_submission
from debias_bench.tracking import TRACKERS, parse_specs, prepare_trackers

from .common import (
    MAX_GRACE_S,
    MAX_SEED,
    data_args,
    duration,
    floats,
    fmt,
    hparam_flag,
    ints,
    number,
)


class CliProgress(Progress):
    """A bar per run on a terminal (steps, steps/s, ETA, the last evaluation); in a log (CI,
    SLURM) a line at the first step, then at most every ``log_every_s`` (``LogLines``)."""

    def __init__(self, label: str, log_every_s: float = 30.0) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self.bar: tqdm | None = None
        self.log = None if self.tty else LogLines("    ", log_every_s)

    def start(self, run_id: str, total_steps: int, start_step: int) -> None:
        if self.log is not None:
            self.log.start(run_id, total_steps, start_step)
            return
        self.bar = tqdm(
            total=total_steps,
            initial=start_step,
            desc=self.label,
            unit="step",
            leave=False,
            dynamic_ncols=True,
        )

    def advance(self, step: int) -> None:
        if self.log is not None:
            self.log.advance(step)
        elif self.bar is not None:
            self.bar.update(step - self.bar.n)

    def evaluated(self, record: dict[str, Any]) -> None:
        if self.log is not None:
            self.log.evaluated(record)
        elif self.bar is not None:
            self.bar.set_postfix_str(eval_text(record))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def summary(outcomes: list[Outcome]) -> str:
    rows = []
    for o in outcomes:
        sel = (o.result or {}).get("selections", {})
        last, best = sel.get("last", {}).get("test", {}), sel.get("best_valid", {}).get("test", {})
        rows.append(
            [
                o.config.method,
                o.config.dataset,
                f"{o.config.ratio:g}",
                o.config.seed,
                o.state,
                fmt(last.get("accuracy")),
                fmt(last.get("conflicting_accuracy")),
                fmt(best.get("accuracy")),
                fmt((o.result or {}).get("train_time_s")),
                o.note.splitlines()[0][:60] if o.note else "",
            ]
        )
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
    return tabulate(rows, headers=headers, tablefmt="github")


def _labels(configs: list[RunConfig]) -> dict[str, str]:
    n = len(configs)
    return {
        c.run_id: f"[{i}/{n}] {c.dataset} {c.method} r{c.ratio:g} s{c.seed}"
        for i, c in enumerate(configs, 1)
    }


def _record_jobs(store: RunStore) -> Any:
    """The SLURM launcher's callback: note each run's job id in its status."""

    def submitted(jobs: dict[str, str]) -> None:
        for run_id, job_id in jobs.items():
            record_submission(store.run(run_id), job_id)

    return submitted


@contextlib.contextmanager
def _handling(signals: Sequence[int], handler: Any) -> Iterator[None]:
    """Install ``handler`` for ``signals`` for the block, then restore the previous ones."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def execute(
    args: argparse.Namespace, configs: list[RunConfig], store: RunStore
) -> tuple[Sweep, int | None]:
    """Run ``configs`` into ``store`` through the launcher that ``execution_args`` chose, with
    the signal handling of ``bench run`` (also ``bench tune``'s); returns the sweep and the
    signal that stopped it, if any."""
    # nothing is recorded until every check has passed (debias_bench.preflight)
    check_device(args.device)
    timeout_s = args.timeout  # seconds > 0 or None (``common.duration``)
    place = DataPlace(paths.raw_root(args.raw_root), paths.data_root(args.data_root))
    check_data(configs, place)
    check_data_root(configs, place)
    check_worker_imports(args.launcher)
    track = parse_specs(args.track or [], store.root)  # a missing library: the install command
    check_out(store.root)  # the last check: it creates --out
    prepare_trackers(track, store.root)
    stop: dict[str, Any] = {"signal": None}
    entry = LAUNCHERS.entry(args.launcher)
    context = LaunchContext(
        store,
        place,
        timeout_s,
        should_stop=lambda: stop["signal"] is not None,
        on_submitted=_record_jobs(store),
        progress=lambda task: CliProgress(task.label),
        track=tuple(track),
    )
    launcher = entry.obj(args, context)
    plan(store, configs)  # every run of the sweep is visible to `bench status` from now on

    def on_signal(signum: int, _frame: Any) -> None:
        if stop["signal"] is not None and entry.meta["kill_on_second_signal"]:
            launcher.close()  # a second signal: kill the workers now
        stop["signal"] = signum  # checkpoint at the next step, then exit (SLURM preemption)

    signals = [signal.SIGTERM, signal.SIGUSR1]
    if not entry.meta["catches_sigint"]:  # inline: Ctrl-C interrupts the run directly
        signals.append(signal.SIGINT)
    todo = sum(not store.run(c.run_id).is_done() for c in configs)
    where = entry.meta["where"].format(device=args.device, parallelism=launcher.parallelism())
    print(
        f"{len(configs)} runs ({len(configs) - todo} already done) -> {store.root} "
        f"{where}, preset {args.preset}, protocol {args.protocol}",
        file=sys.stderr,
    )
    with _handling(signals, on_signal):
        sweep = schedule(
            launcher,
            configs,
            store,
            labels=_labels(configs),
            retry_failed=args.retry_failed,
            max_attempts=args.max_attempts,
            fail_fast=args.fail_fast,
            should_stop=lambda: (
                stop["signal"] is not None
                or (args.no_wait and bool(getattr(launcher, "jobs", None)))
            ),
            wait_for_held=not args.no_wait,
        )
    return sweep, stop["signal"] or sweep.signal  # inline: Ctrl-C reaches the run itself


def cmd_run(args: argparse.Namespace) -> int:
    check_path(Path(args.out), "--out")  # --dry-run too: a path no file system takes
    tuned: dict[tuple[str, str, float], dict[str, Any]] = {}
    if args.hparams:  # checked: types, duplicates, protocol (debias_bench.reporting.tuned)
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
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    store = RunStore(Path(args.out))
    if args.dry_run:
        for c in configs:
            done = RunState.DONE.value if store.run(c.run_id).is_done() else "todo"
            print(f"{done}  {c.run_id}")
        return 0
    overall = time.perf_counter()
    sweep, signum = execute(args, configs, store)
    outcomes = sweep.outcomes
    print(summary(outcomes))
    failed = sum(o.state is RunState.FAILED for o in outcomes)
    print(
        f"\n{sum(o.ran for o in outcomes)} ran, {failed} failed, "
        f"in {time.perf_counter() - overall:.0f} s; results in {store.root}",
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
    run.add_argument("--methods", default="vanilla,etf_debias", help="comma list or 'all'")
    run.add_argument("--datasets", default="cmnist", help="comma list or 'all'")
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


#: the most a flag may ask for: far beyond any machine or cluster, short of a typo
MAX_ATTEMPTS_LIMIT = 100
MAX_WORKERS = 1024


def execution_args(run: argparse.ArgumentParser) -> None:
    """Failures and where runs execute (launcher, workers, SLURM): the flags ``execute`` reads
    (shared by ``bench run`` and ``bench tune``)."""
    fail = run.add_argument_group("failures")
    fail.add_argument("--retry-failed", action="store_true", help="rerun runs that failed")
    fail.add_argument(
        "--max-attempts",
        type=number("int", 1, MAX_ATTEMPTS_LIMIT),
        default=MAX_ATTEMPTS,
        help="give a run up after this many attempts (default %(default)s)",
    )
    fail.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    fail.add_argument(
        "--timeout",
        type=duration,
        help="stop a run that trains longer than this (seconds, or 30m, 2h); local and slurm",
    )
    fail.add_argument(
        "--grace",
        type=number("float", 0, MAX_GRACE_S),
        default=30.0,
        help="seconds a stopped run gets to checkpoint before SIGKILL (default %(default)s)",
    )

    tracking = run.add_argument_group("experiment tracking")
    tracking.add_argument(
        "--track",
        action="append",
        metavar="KIND[=TARGET]",
        help="send every run to a tracker (repeatable): "
        + "; ".join(f"{e.name}: {e.display_name}" for e in TRACKERS),
    )

    where = run.add_argument_group("where runs execute")
    where.add_argument(
        "--launcher",
        default="inline",
        choices=LAUNCHERS.names(),
        help="; ".join(f"{e.name}: {e.display_name}" for e in LAUNCHERS),
    )
    where.add_argument(
        "--workers",
        type=number("int", 1, MAX_WORKERS),
        help="local: worker processes (default: every GPU slot, or 1 on CPU)",
    )
    where.add_argument(
        "--jobs-per-gpu",
        type=number("int", 1, MAX_WORKERS),
        default=1,
        help="local: runs sharing one GPU (default 1)",
    )

    slurm = run.add_argument_group("slurm (defaults for every run; per dataset: --resources)")
    slurm.add_argument("--partition")
    slurm.add_argument("--time", help="time limit per run: minutes or [D-]HH:MM:SS (default 60)")
    slurm.add_argument("--gpus-per-run", type=number("int", 0, 64))
    slurm.add_argument("--cpus-per-run", type=number("int", 1, 1024))
    slurm.add_argument("--mem-per-run", help="e.g. 16G")
    slurm.add_argument(
        "--resources", help="YAML with default: and datasets: {name: {time, gpus, ...}}"
    )
    slurm.add_argument(
        "--array-parallelism",
        type=number("int", 1, 100_000),
        default=64,
        help="runs of one array at once",
    )
    slurm.add_argument(
        "--no-wait",
        action="store_true",
        help="do not wait for runs another live `bench run` holds (they count as not done: "
        "exit 1); slurm: also submit and return (follow with bench status)",
    )
