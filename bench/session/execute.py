"""How a grid executes, for ``bench run``, ``bench tune`` and ``debias_bench.run``: the
launcher it picks (each registered launcher declares its own options,
``debias_bench.launchers.factories``), the checks before anything is recorded, the signals that
stop a sweep, and each run's progress display (a bar on a terminal, log lines elsewhere).

:class:`Execution` is how a grid executes, typed: the flags of ``bench run``'s "failures",
"experiment tracking" and "where runs execute" sections, or the keywords of
``debias_bench.run``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from debias_bench import paths
from debias_bench.config.bounds import (
    MAX_ATTEMPTS_LIMIT,
    MAX_GRACE_S,
    check_bound,
    check_thread_env,
    seconds,
)
from debias_bench.config.run_config import RunConfig
from debias_bench.launchers import Launcher, Sweep, schedule
from debias_bench.launchers.factories import LAUNCHERS, LaunchContext, build_launcher
from debias_bench.launchers.other_data import other_data_notes
from debias_bench.launchers.preflight import (
    check_data,
    check_data_root,
    check_device,
    check_out,
    check_weights,
)
from debias_bench.launchers.run_one import MAX_ATTEMPTS, plan, record_submission
from debias_bench.launchers.scheduler import signal_label
from debias_bench.paths import DataPlace
from debias_bench.runs.progress import LogLines, Progress, eval_text
from debias_bench.runs.store import RunStore
from debias_bench.tracking import parse_specs, prepare_trackers


@dataclass(frozen=True)
class Execution:
    """How the runs of a grid execute (every field has ``bench run``'s default): the launcher
    and its own options (``{"workers": 2}``), the device, where the data lies, what a failure
    does (``retry_failed``, ``max_attempts``, ``fail_fast``, ``timeout_s``, ``grace_s``), the
    trackers (``["mlflow"]``, as ``--track``) and ``no_wait``."""

    launcher: str = "inline"
    launcher_options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "auto"
    raw_root: str | None = None
    data_root: str | None = None
    retry_failed: bool = False
    max_attempts: int = MAX_ATTEMPTS
    fail_fast: bool = False
    timeout_s: float | str | None = None
    grace_s: float = 30.0
    track: Sequence[str] = ()
    no_wait: bool = False

    def check(self) -> None:
        """The bounds the flags' types check, for values given from Python; the launcher's
        name (its options are checked when it is built)."""
        LAUNCHERS.get(self.launcher)
        check_bound("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS_LIMIT)
        check_bound("grace_s", self.grace_s, 0, MAX_GRACE_S)
        if self.timeout_s is not None:
            seconds(self.timeout_s)

    def place(self) -> DataPlace:
        return DataPlace(paths.raw_root(self.raw_root), paths.data_root(self.data_root))


@contextlib.contextmanager
def handling(signals: Sequence[int], handler: Any) -> Iterator[None]:
    """Install ``handler`` for ``signals`` for the block, then restore the previous ones."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class RunProgress(Progress):
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
    how: Execution,
    configs: list[RunConfig],
    store: RunStore,
    should_stop: Callable[[], bool],
) -> Launcher:
    """Every check of the sweep, the launcher's own included, then ``--out`` and the trackers
    (the first things written) and the launcher, which has not started anything yet."""
    how.check()
    check_thread_env(os.environ)  # before torch reads it
    check_device(how.device)
    place = how.place()
    check_data(configs, place)
    check_data_root(configs, place)
    check_weights(configs)
    track = parse_specs(list(how.track), store.root)  # a missing library: the install command
    context = LaunchContext(
        store,
        place,
        device=how.device,
        max_attempts=how.max_attempts,
        timeout_s=None if how.timeout_s is None else seconds(how.timeout_s),
        grace_s=how.grace_s,
        should_stop=should_stop,
        on_submitted=_record_jobs(store),
        progress=lambda task: RunProgress(task.label),
        track=tuple(track),
        cells=tuple(dict.fromkeys((c.dataset, c.method) for c in configs)),
    )
    launcher = build_launcher(how.launcher, how.launcher_options, context)  # checks them
    try:
        check_out(store.root)  # the last check: it creates --out
        prepare_trackers(track, store.root)
    except BaseException:
        launcher.close()
        raise
    return launcher


def execute(
    how: Execution, configs: list[RunConfig], store: RunStore, preset: str, protocol: str
) -> tuple[Sweep, int | None]:
    """Run ``configs`` into ``store`` as ``how`` says, with the signal handling of ``bench
    run`` (also ``bench tune``'s and ``debias_bench.run``'s); returns the sweep and the signal
    that stopped it, if any (``preset`` and ``protocol``: what the start line says)."""
    # nothing is recorded until every check has passed (debias_bench.launchers.preflight)
    stop: dict[str, Any] = {"signal": None}
    launcher = _prepared_launcher(how, configs, store, lambda: stop["signal"] is not None)
    entry = LAUNCHERS.entry(how.launcher)

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
                f"step (again, or after --grace {how.grace_s:g} s: kill them)"
            )
        else:
            _say(f"\n{signal_label(signum)}: stopping the sweep")

    # SIGHUP (a closed terminal or ssh session) stops a sweep like SIGTERM; an inline launcher
    # (``catches_sigint``) takes SIGINT, SIGTERM and SIGHUP over while its runs execute
    signals = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1]
    with handling(signals, on_signal):
        return _run_sweep(
            how, configs, store, launcher, stop, f"preset {preset}, protocol {protocol}"
        )


def _run_sweep(
    how: Execution,
    configs: list[RunConfig],
    store: RunStore,
    launcher: Launcher,
    stop: dict[str, Any],
    terms: str,
) -> tuple[Sweep, int | None]:
    """Plan, say what starts, schedule (the stop signals are handled: :func:`execute`)."""
    entry = LAUNCHERS.entry(how.launcher)
    plan(store, configs)  # every run of the sweep is visible to `bench status` from now on
    todo = sum(not store.run(c.run_id).is_done() for c in configs)
    where = entry.meta["where"].format(device=how.device, parallelism=launcher.parallelism())
    print(
        f"{len(configs)} runs ({len(configs) - todo} already done) -> {store.root} "
        f"{where}, {terms}",
        file=sys.stderr,
    )
    for note in other_data_notes(configs, store, how.place()):  # done, but on data rebuilt since
        print(note, file=sys.stderr)
    crowded = launcher.crowding() if todo else None
    if crowded:
        print(f"warning: {crowded}", file=sys.stderr)
    sweep = schedule(
        launcher,
        configs,
        store,
        labels=_labels(configs),
        retry_failed=how.retry_failed,
        max_attempts=how.max_attempts,
        fail_fast=how.fail_fast,
        should_stop=lambda: stop["signal"] is not None or _submitted_all(how, launcher),
        wait_for_held=not how.no_wait,
    )
    return sweep, stop["signal"] or sweep.signal  # inline: Ctrl-C reaches the run itself


def _submitted_all(how: Execution, launcher: Launcher) -> bool:
    """``no_wait`` with a launcher whose runs go on without the sweep (SLURM): stop once
    they are submitted."""
    return bool(how.no_wait and launcher.active() and launcher.detach() is not None)
