"""The sweep loop, the same for every launcher: decide, launch, watch, retry, summarise.

A launcher only knows how to start runs and tell when they ended (:class:`Launcher`, in
:mod:`debias_bench.launchers.contract` with the :class:`Task` and :class:`Ended` it trades); the
scheduler decides which runs to start (:func:`~debias_bench.launchers.run_one.decide`), retries
failures with ``retry_failed`` up to ``max_attempts``, stops everything on the first failure with
``fail_fast`` (running runs checkpoint and stay resumable), and prints a live summary line
(done / running / queued / failed / pending, ETA: :class:`~debias_bench.runs.progress.LiveSummary`)
as states change. :class:`SweepLoop` is the loop, one named step a method.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from debias_bench.config.run_config import RunConfig
from debias_bench.launchers.contract import Ended, Launcher, Task, signal_label
from debias_bench.launchers.run_one import MAX_ATTEMPTS, Outcome, decide, record_decision
from debias_bench.runs.eta import done_timing, finished_timings, run_kind, time_left
from debias_bench.runs.progress import Live, LiveSummary, summary_line
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import COUNTED_AS, SUCCESS, Decision, RunState, clock_skew
from debias_bench.runs.store import RunStore

__all__ = [
    "Ended",  # Ended, Launcher, Task and signal_label live in debias_bench.launchers.contract
    "Launcher",
    "LiveSummary",  # the summary line lives in debias_bench.runs.progress
    "Policy",
    "Sweep",
    "SweepLoop",
    "Task",
    "schedule",
    "signal_label",
    "summary_line",
]


@dataclass
class Sweep:
    """What happened in one ``bench run``: outcomes in grid order, and why it stopped.

    Every run of the grid has an outcome whose state says where it stands: done or skipped;
    failed; interrupted (stopped on request: a signal, fail-fast, a SIGTERM to its worker);
    dead (its process was killed; a plain rerun resumes it); running (held by another live
    process, not waited for: ``--no-wait``, or the sweep was stopped); pending (not started)."""

    outcomes: list[Outcome]
    stopped: str | None = None  # 'fail-fast' | 'signal' | 'detached: ...'
    retried: list[str] = field(default_factory=list)
    #: the signal that stopped the sweep from inside a launcher (an inline run's Ctrl-C)
    signal: int | None = None

    def unfinished(self) -> list[Outcome]:
        """The outcomes that are neither done nor skipped by their method."""
        return [o for o in self.outcomes if o.state not in SUCCESS]

    def held(self) -> list[Outcome]:
        """Runs another live process holds (``running``), which this sweep did not wait for."""
        return [o for o in self.outcomes if o.state is RunState.RUNNING]


#: how often a sweep re-reads the runs it waits for and its running runs' progress
WATCH_EVERY_S = 2.0
#: how often it looks for its runs still to start in another process's hands (a status read
#: each, so less often: a grid may queue thousands)
ELSEWHERE_EVERY_S = 30.0


def _held_note(run_dir: RunDir) -> str:
    """``pid 123 on host`` of the process that holds a run (what its status says), and why
    its heartbeat is not believed when it is from the future (:func:`clock_skew`)."""
    with contextlib.suppress(Exception):
        status = run_dir.status()
        if status.get("pid"):
            holder = f"pid {status['pid']} on {status.get('host', '?')}"
            skew = clock_skew(run_dir.facts())
            return f"{holder} ({skew})" if skew else holder
    return "another process"


def schedule(
    launcher: Launcher,
    configs: list[RunConfig],
    store: RunStore,
    labels: dict[str, str] | None = None,
    retry_failed: bool = False,
    max_attempts: int = MAX_ATTEMPTS,
    fail_fast: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    live: LiveSummary | None = None,
    wait_for_held: bool = True,
) -> Sweep:
    """Run ``configs`` through ``launcher``; returns when every run has ended (or, for a
    launcher that can detach, when asked to stop).

    A run that another live process holds (a second ``bench run`` of an overlapping grid) is
    waited for, with a note, and then taken over if it is not done (resumed from its
    checkpoint); with ``wait_for_held=False`` it is reported as ``running`` at once."""
    policy = Policy(retry_failed, max_attempts, fail_fast, wait_for_held)
    loop = SweepLoop(launcher, configs, store, policy, labels or {}, live)
    return loop.run(should_stop)


@dataclass(frozen=True)
class Policy:
    """What a sweep does with failures and with runs another process holds."""

    retry_failed: bool = False
    max_attempts: int = MAX_ATTEMPTS
    fail_fast: bool = False
    wait_for_held: bool = True


def _say(text: str) -> None:
    print(f"    {text}", file=sys.stderr, flush=True)


class SweepLoop:
    """One sweep while it runs (:func:`schedule`): decide, fill free slots, collect ended
    runs, retry or stop, show progress, and finish with an outcome for every run.

    Every run of the grid is in one place at a time: ``queue`` (to start), ``held`` (another
    process holds it and the sweep waits), the launcher (``active``), ``not_started`` (the
    sweep stopped before it started) or ``outcomes`` (ended, or decided without training)."""

    def __init__(
        self,
        launcher: Launcher,
        configs: list[RunConfig],
        store: RunStore,
        policy: Policy,
        labels: dict[str, str],
        live: LiveSummary | None = None,
    ) -> None:
        self.launcher, self.configs, self.store, self.policy = launcher, configs, store, policy
        self.labels = labels
        self.live = live or LiveSummary(len(configs))
        self.outcomes: dict[str, Outcome] = {}
        self.queue: list[Task] = []
        self.held: dict[str, Task] = {}  # run id -> the run another process must release
        self.not_started: list[Task] = []
        self.sweep = Sweep([])
        self.halted = False
        self.kinds = {c.run_id: run_kind(c.dataset, c.method, c.preset, c.hparams) for c in configs}
        #: (kind, seconds) of the store's done runs, as `bench status` reads them
        self.finished = finished_timings(store)
        self.progress: dict[str, Live | None] = {}  # running run id -> its heartbeat's progress
        self.watched_at = 0.0
        #: run id still to start here -> its progress where another live process trains it
        self.elsewhere: dict[str, Live | None] = {}
        self.elsewhere_at = -ELSEWHERE_EVERY_S

    # ---------------------------------------------------------------- the loop
    def run(self, should_stop: Callable[[], bool]) -> Sweep:
        for config in self.configs:
            self.settle(config, self.decide(config.run_id))
        while self.busy():
            stop_signal = getattr(self.launcher, "stop_signal", None)
            if (should_stop() or stop_signal) and not self.halted and self.stop(stop_signal):
                break  # detached: the launcher's runs go on without the sweep
            for ended in self.launcher.poll():
                self.collect(ended)
            self.fill_free_slots()  # a slot freed by this poll takes its next run at once
            self.watch()
            self.report()
            self.pause()
        return self.finish()

    def busy(self) -> bool:
        return bool(self.queue or self.held or self.launcher.active())

    def pause(self) -> None:
        """Wait before the next round: longer when nothing runs and nothing can start."""
        if self.busy():
            idle = not self.launcher.active() and (self.halted or not self.queue)
            self.launcher.wait(max(self.launcher.poll_interval_s, 0.5 if idle else 0.0))

    # ---------------------------------------------------------------- deciding
    def decide(self, run_id: str, retry_failed: bool | None = None) -> Decision:
        retry = self.policy.retry_failed if retry_failed is None else retry_failed
        return decide(self.store.run(run_id), retry, self.policy.max_attempts)

    def settle(self, config: RunConfig, decision: Decision) -> None:
        """Queue a run the decision says to train; else record its outcome."""
        task = Task(config, self.labels.get(config.run_id, config.run_id))
        if decision.run:
            self.enqueue(task)
        elif decision.state is RunState.RUNNING:
            self.hold(task)
        else:
            run_dir = self.store.run(config.run_id)
            record_decision(run_dir, decision)  # a dead run given up on is failed for all
            if decision.state is RunState.CORRUPT:  # the file and the fix, in full
                _say(f"CORRUPT {task.label}: {decision.note}")
            result = run_dir.result() if decision.state is RunState.DONE else None
            self.record(task, decision.state, decision.note, result)

    def enqueue(self, task: Task) -> None:
        """To start, unless the sweep stopped (then it is reported as not started)."""
        (self.not_started if self.halted else self.queue).append(task)

    def hold(self, task: Task) -> None:
        """A run another live process holds: wait for it, or report it as running."""
        holder = _held_note(self.store.run(task.run_id))
        if not self.policy.wait_for_held:
            note = f"held by {holder}; not waited for (--no-wait)"
            _say(f"{task.label}: {note}")
            self.record(task, RunState.RUNNING, note)
            return
        _say(f"{task.label}: held by {holder}: waiting for it (--no-wait: do not wait)")
        self.held[task.run_id] = task

    def record(
        self,
        task: Task,
        state: RunState,
        note: str,
        result: dict[str, Any] | None = None,
        ran: bool = False,
    ) -> None:
        run_dir = self.store.run(task.run_id)
        self.outcomes[task.run_id] = Outcome(task.config, run_dir, state, note, result, ran=ran)

    # ---------------------------------------------------------------- starting and ending
    def fill_free_slots(self) -> None:
        if self.halted or not self.queue or (n := self.launcher.free()) <= 0:
            return
        batch, self.queue[:] = self.queue[:n], self.queue[n:]
        self.launcher.start(batch)

    def collect(self, ended: Ended) -> None:
        """Take in a run that ended: retry it, wait for whoever took it, or record it."""
        task = ended.task
        if ended.state == RunState.DONE and ended.ran:
            timing = done_timing(self.store.run(task.run_id))
            self.finished += [timing] if timing else []
        if self.retries(ended):
            self.sweep.retried.append(task.run_id)
            _say(f"retrying {task.label}: {ended.note}")
            self.enqueue(task)
            return
        if ended.state == RunState.RUNNING and not ended.ran and not self.halted:
            self.hold(task)  # another process took it between our decision and our start
            return
        done = ended.state == RunState.DONE
        result = ended.result or (self.store.run(task.run_id).result() if done else None)
        self.record(task, ended.state, ended.note, result, ran=ended.ran)
        if ended.state == RunState.DEAD:
            _say(f"DIED {task.label}: {ended.note}")
        if ended.state == RunState.FAILED and ended.ran:
            _say(f"FAILED {task.label}: {ended.note}")
            if self.policy.fail_fast and not self.halted:
                self.halt("fail-fast")
                self.launcher.stop()

    def retries(self, ended: Ended) -> bool:
        """Whether a failed run is started again (``retry_failed``, attempts left)."""
        return (
            ended.state == RunState.FAILED
            and ended.ran
            and self.policy.retry_failed
            and not self.halted
            and self.decide(ended.task.run_id, retry_failed=True).run
        )

    # ---------------------------------------------------------------- stopping
    def halt(self, why: str) -> None:
        """Start nothing more: the queued runs are reported as not started."""
        self.halted, self.sweep.stopped = True, why
        self.not_started += self.queue
        self.queue.clear()

    def stop(self, stop_signal: int | None) -> bool:
        """Stop on request (a signal): give up waiting for held runs, then detach from the
        launcher's runs or ask them to stop. True when detached (the loop ends now)."""
        self.halt("signal")
        self.sweep.signal = stop_signal
        for task in self.held.values():  # no longer waited for: still held elsewhere
            holder = _held_note(self.store.run(task.run_id))
            self.record(task, RunState.RUNNING, f"held by {holder}; not waited for (stopped)")
        self.held.clear()
        message = self.launcher.detach()
        if message:
            self.sweep.stopped = f"detached: {message}"
            return True
        self.launcher.stop()
        return False

    # ---------------------------------------------------------------- watching
    def watch(self) -> None:
        """Every ``WATCH_EVERY_S``: the running runs' progress, and the held runs released."""
        if time.monotonic() - self.watched_at < WATCH_EVERY_S:
            return
        self.watched_at = time.monotonic()
        self.read_progress()
        self.release_held()
        self.read_elsewhere()

    def read_progress(self) -> None:
        self.progress.clear()
        for run_id, state in self.launcher.active().items():
            if state == RunState.RUNNING:
                with contextlib.suppress(Exception):  # a torn or foreign file: no progress
                    self.progress[run_id] = Live.from_status(self.store.run(run_id).status())
                self.progress.setdefault(run_id, None)

    def read_elsewhere(self) -> None:
        """Every ``ELSEWHERE_EVERY_S``: the runs still to start here (or held) that another
        live process is training, an overlapping sweep over the same store, with their
        progress. The ETA counts them as running there, as `bench status` does: counted as runs
        still to start, two sweeps sharing two cores each said 1h12m where 30 min were left."""
        if time.monotonic() - self.elsewhere_at < ELSEWHERE_EVERY_S:
            return
        self.elsewhere_at = time.monotonic()
        self.elsewhere = {}
        for run_id in [*(t.run_id for t in self.queue), *self.held]:
            run_dir = self.store.run(run_id)
            with contextlib.suppress(Exception):  # a torn or foreign file: not known to run
                status = run_dir.status()
                if status.get("state") == RunState.RUNNING and run_dir.lock_held():
                    self.elsewhere[run_id] = Live.from_status(status)

    def release_held(self) -> None:
        """Settle the held runs whose holder let go of them."""
        for run_id, task in list(self.held.items()):
            decision = self.decide(run_id)
            if decision.state is not RunState.RUNNING or decision.run:
                del self.held[run_id]
                _say(f"{task.label}: released ({decision.state})")
                self.settle(task.config, decision)

    def counts(self) -> Counter:
        """Runs per state, as the summary line counts them."""
        counts: Counter = Counter()
        for outcome in self.outcomes.values():
            counts[COUNTED_AS.get(outcome.state, outcome.state)] += 1
        counts.update(self.launcher.active().values())
        counts[RunState.PENDING] += len(self.queue) + len(self.not_started)
        counts["held"] += len(self.held)
        return counts

    def report(self, force: bool = False) -> None:
        """The summary line, with the sweep's ETA (:func:`~debias_bench.runs.eta.time_left`,
        as `bench status` computes it)."""
        counts, active = self.counts(), self.launcher.active()
        running = [
            (self.kinds[r], self.progress.get(r))
            for r, state in active.items()
            if state == RunState.RUNNING
        ]
        to_start = [*(t.run_id for t in (*self.queue, *self.not_started)), *self.held]
        elsewhere = {r: self.elsewhere[r] for r in to_start if r in self.elsewhere}
        queued = [self.kinds[r] for r, state in active.items() if state != RunState.RUNNING]
        waiting: list[str | None] = [self.kinds[r] for r in to_start if r not in elsewhere]
        waiting += queued
        counted = counts[RunState.PENDING] + counts["queued"] + counts["held"]
        unlisted = counted - len(to_start) - len(queued)  # counted, their kind unknown here
        waiting += [None] * max(0, unlisted)
        there = [(self.kinds[r], live) for r, live in elsewhere.items()]
        eta = time_left(self.finished, waiting, running + there)
        self.live.update(counts, eta, force, [p for _, p in running if p is not None])

    # ---------------------------------------------------------------- the end
    def finish(self) -> Sweep:
        """The last summary line, and an outcome for every run, in grid order."""
        stop_signal = getattr(self.launcher, "stop_signal", None)
        if stop_signal and self.sweep.signal is None:  # it came during the last run (inline)
            self.sweep.signal = stop_signal
            self.sweep.stopped = self.sweep.stopped or "signal"
        self.report(force=True)
        self.launcher.close()
        for task in self.not_started:  # halted or detached before they started
            self.outcomes.setdefault(
                task.run_id,
                Outcome(task.config, self.store.run(task.run_id), RunState.PENDING, "not started"),
            )
        by_id = {c.run_id: c for c in self.configs}
        for run_id, state in self.launcher.active().items():
            self.outcomes.setdefault(
                run_id,
                Outcome(
                    by_id[run_id],
                    self.store.run(run_id),
                    RunState.RUNNING,
                    f"still in SLURM ({state})",
                ),
            )
        self.sweep.outcomes = [
            self.outcomes[c.run_id] for c in self.configs if c.run_id in self.outcomes
        ]
        return self.sweep
