"""How `bench run` and `bench tune` execute a grid: the launcher the command line picks (each
registered launcher declares its own flags, ``debias_bench.launchers.factories``), the checks
before anything is recorded, the signals that stop a sweep, and each run's progress display.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from debias_bench import paths
from debias_bench.config.flags import MAX_GRACE_S, check_thread_env, duration, number
from debias_bench.config.run_config import RunConfig
from debias_bench.errors import ConfigError
from debias_bench.launchers import Launcher, Sweep, schedule
from debias_bench.launchers.factories import LAUNCHERS, LaunchContext, foreign_flags
from debias_bench.launchers.preflight import check_data, check_data_root, check_device, check_out
from debias_bench.launchers.run_one import MAX_ATTEMPTS, plan, record_submission
from debias_bench.launchers.scheduler import signal_label
from debias_bench.paths import DataPlace
from debias_bench.runs.progress import LogLines, Progress, eval_text
from debias_bench.runs.store import RunStore
from debias_bench.tracking import TRACKERS, parse_specs, prepare_trackers

from .common import handling


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


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # a hung-up terminal (SIGHUP) must not end the stop
        print(text, file=sys.stderr, flush=True)


def _labels(configs: list[RunConfig]) -> dict[str, str]:
    n = len(configs)
    return {
        c.run_id: f"[{i}/{n}] {c.dataset} {c.method} r{c.ratio:g} s{c.seed}"
        for i, c in enumerate(configs, 1)
    }


def _record_jobs(store: RunStore) -> Callable[[dict[str, str]], None]:
    """A cluster launcher's callback: note each run's job id in its status."""

    def submitted(jobs: dict[str, str]) -> None:
        for run_id, job_id in jobs.items():
            record_submission(store.run(run_id), job_id)

    return submitted


def _prepared_launcher(
    args: argparse.Namespace,
    configs: list[RunConfig],
    store: RunStore,
    should_stop: Callable[[], bool],
) -> Launcher:
    """Every check of the sweep, the launcher's own included, then ``--out`` and the trackers
    (the first things written) and the launcher, which has not started anything yet."""
    check_launcher_flags(args)
    check_thread_env(os.environ)  # before torch reads it
    check_device(args.device)
    place = DataPlace(paths.raw_root(args.raw_root), paths.data_root(args.data_root))
    check_data(configs, place)
    check_data_root(configs, place)
    track = parse_specs(args.track or [], store.root)  # a missing library: the install command
    context = LaunchContext(
        store,
        place,
        device=args.device,
        max_attempts=args.max_attempts,
        timeout_s=args.timeout,  # seconds > 0 or None (``common.duration``)
        grace_s=args.grace,
        should_stop=should_stop,
        on_submitted=_record_jobs(store),
        progress=lambda task: CliProgress(task.label),
        track=tuple(track),
    )
    launcher = LAUNCHERS.get(args.launcher).from_args(args, context)  # checks its flags
    try:
        check_out(store.root)  # the last check: it creates --out
        prepare_trackers(track, store.root)
    except BaseException:
        launcher.close()
        raise
    return launcher


def check_launcher_flags(args: argparse.Namespace) -> None:
    """A flag of another launcher than ``--launcher`` (``--threads`` under inline or slurm)
    would do nothing: one error naming the launcher that uses it."""
    foreign = foreign_flags(args, args.launcher)
    if not foreign:
        return
    owners: dict[str, list[str]] = {}
    for flag, owner in foreign.items():
        owners.setdefault(owner, []).append(flag)
    named = "; ".join(
        f"{', '.join(flags)} {'is a flag' if len(flags) == 1 else 'are flags'} "
        f"of --launcher {owner}"
        for owner, flags in owners.items()
    )
    raise ConfigError(
        f"{named}: --launcher {args.launcher} does not use {'it' if len(foreign) == 1 else 'them'}",
        hint=f"add --launcher {next(iter(owners))}, or leave out {', '.join(foreign)} "
        "(`bench run --help` lists each launcher's flags under its name)",
    )


def execute(
    args: argparse.Namespace, configs: list[RunConfig], store: RunStore
) -> tuple[Sweep, int | None]:
    """Run ``configs`` into ``store`` through the launcher ``--launcher`` names, with the
    signal handling of ``bench run`` (also ``bench tune``'s); returns the sweep and the
    signal that stopped it, if any."""
    # nothing is recorded until every check has passed (debias_bench.launchers.preflight)
    stop: dict[str, Any] = {"signal": None}
    launcher = _prepared_launcher(args, configs, store, lambda: stop["signal"] is not None)
    entry = LAUNCHERS.entry(args.launcher)

    def on_signal(signum: int, _frame: Any) -> None:
        if stop["signal"] is not None:
            if entry.meta["kill_on_second_signal"]:
                _say(f"{signal_label(signum)} again: killing the running runs")
                launcher.close()  # a second signal: kill the workers now
            return
        stop["signal"] = signum  # checkpoint at the next step, then exit (SLURM preemption)
        if entry.meta["kill_on_second_signal"]:
            _say(
                f"\n{signal_label(signum)}: stopping; the running runs checkpoint at their next "
                f"step (again, or after --grace {args.grace:g} s: kill them)"
            )
        else:
            _say(f"\n{signal_label(signum)}: stopping the sweep")

    # SIGHUP (a closed terminal or ssh session) stops a sweep like SIGTERM; an inline launcher
    # (``catches_sigint``) takes SIGINT, SIGTERM and SIGHUP over while its runs execute
    signals = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1]
    with handling(signals, on_signal):
        return _run_sweep(args, configs, store, launcher, stop)


def _run_sweep(
    args: argparse.Namespace,
    configs: list[RunConfig],
    store: RunStore,
    launcher: Launcher,
    stop: dict[str, Any],
) -> tuple[Sweep, int | None]:
    """Plan, say what starts, schedule (the stop signals are handled: :func:`execute`)."""
    entry = LAUNCHERS.entry(args.launcher)
    plan(store, configs)  # every run of the sweep is visible to `bench status` from now on
    todo = sum(not store.run(c.run_id).is_done() for c in configs)
    where = entry.meta["where"].format(device=args.device, parallelism=launcher.parallelism())
    print(
        f"{len(configs)} runs ({len(configs) - todo} already done) -> {store.root} "
        f"{where}, preset {args.preset}, protocol {args.protocol}",
        file=sys.stderr,
    )
    crowded = launcher.crowding() if todo else None
    if crowded:
        print(f"warning: {crowded}", file=sys.stderr)
    sweep = schedule(
        launcher,
        configs,
        store,
        labels=_labels(configs),
        retry_failed=args.retry_failed,
        max_attempts=args.max_attempts,
        fail_fast=args.fail_fast,
        should_stop=lambda: stop["signal"] is not None or _submitted_all(args, launcher),
        wait_for_held=not args.no_wait,
    )
    return sweep, stop["signal"] or sweep.signal  # inline: Ctrl-C reaches the run itself


def _submitted_all(args: argparse.Namespace, launcher: Launcher) -> bool:
    """``--no-wait`` with a launcher whose runs go on without the sweep (SLURM): stop once
    they are submitted."""
    return bool(args.no_wait and launcher.active() and launcher.detach() is not None)


#: the most a flag may ask for: far beyond any machine or cluster, short of a typo
MAX_ATTEMPTS_LIMIT = 100


def execution_args(run: argparse.ArgumentParser) -> None:
    """Failures, tracking and where runs execute (the launcher and each launcher's own flags):
    the flags ``execute`` reads (shared by ``bench run`` and ``bench tune``)."""
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
    launcher_args(run)


def launcher_args(run: argparse.ArgumentParser) -> None:
    """``--launcher`` with the registered launchers (plugins included: they are imported
    before the parser is built), then a section of flags for each launcher that has some."""
    where = run.add_argument_group("where runs execute")
    where.add_argument(
        "--launcher",
        default="inline",
        choices=LAUNCHERS.names(),
        help="; ".join(f"{e.name}: {e.display_name}" for e in LAUNCHERS),
    )
    where.add_argument(
        "--no-wait",
        action="store_true",
        help="do not wait for runs another live `bench run` holds (they count as not done: "
        "exit 1); slurm: also submit and return (follow with bench status)",
    )
    for entry in LAUNCHERS:
        group = run.add_argument_group(f"--launcher {entry.name}")
        try:
            entry.obj.add_arguments(group)
        except argparse.ArgumentError as exc:  # a flag name bench (or a launcher) already has
            raise ConfigError(
                f"launcher {entry.name!r} ({entry.obj.__module__}): {exc}",
                hint="give the launcher's flag another name in its add_arguments",
            ) from None
        except Exception as exc:  # a plugin's own bug: name it, no traceback
            raise ConfigError(
                f"launcher {entry.name!r} ({entry.obj.__module__}) failed to declare its "
                f"flags: {type(exc).__name__}: {exc}",
                hint="fix its add_arguments, or remove its plugin from BENCH_PLUGINS",
            ) from None
