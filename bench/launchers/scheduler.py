"""The sweep loop, the same for every launcher: decide, launch, watch, retry, summarise.

A launcher only knows how to start runs and tell when they ended (:class:`Launcher`); the
scheduler decides which runs to start (:func:`~debias_bench.sweep.decide`), retries failures
with ``retry_failed`` up to ``max_attempts``, stops everything on the first failure with
``fail_fast`` (running runs checkpoint and stay resumable), and prints a live summary line
(done / running / queued / failed / pending, ETA) as states change.
"""

from __future__ import annotations

import contextlib
import sys
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from debias_bench.config import RunConfig
from debias_bench.runprogress import Live, fmt_duration, run_kind, running_text, sweep_eta
from debias_bench.states import COUNTED_AS, SUCCESS, RunState
from debias_bench.store import RunStore
from debias_bench.sweep import MAX_ATTEMPTS, Outcome, decide, record_decision


@dataclass
class Task:
    config: RunConfig
    label: str
    started: float | None = None  # time.time() of the latest start in this sweep

    @property
    def run_id(self) -> str:
        return self.config.run_id


@dataclass
class Ended:
    """A run whose worker (or job) ended, with the state it recorded."""

    task: Task
    state: RunState  # done | failed | interrupted | skipped | corrupt | running (elsewhere)
    note: str = ""
    ran: bool = True
    result: dict[str, Any] | None = None


class Launcher(ABC):
    """Where runs execute. ``start`` must not block for long (except the inline launcher,
    which runs in the caller's process)."""

    name = "launcher"
    poll_interval_s = 0.2

    @abstractmethod
    def free(self) -> int:
        """How many more runs can start now."""

    @abstractmethod
    def start(self, tasks: list[Task]) -> None: ...

    @abstractmethod
    def poll(self) -> list[Ended]:
        """The runs that ended since the last call."""

    @abstractmethod
    def active(self) -> dict[str, str]:
        """run id -> 'running' or 'queued', for the runs started and not yet ended."""

    @abstractmethod
    def stop(self) -> None:
        """Ask the active runs to checkpoint and stop (fail-fast, or a signal to the sweep)."""

    def parallelism(self) -> int:
        """How many runs execute at once (for the ETA)."""
        return 1

    def detach(self) -> str | None:
        """When the sweep process stops while runs are active: a message if they keep going
        without it (SLURM), or None if the sweep must wait for them to stop (local)."""
        return None

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release what the launcher holds when the sweep ends."""


def summary_line(
    counts: Counter, total: int, eta_s: float | None, running: Sequence[Live] = ()
) -> str:
    """``3 done, 1 running (step 120/240, 35 steps/s, ETA 4s), 1 failed, 4 pending (of 10);
    ETA 5m00s``; other states (queued, held, dead, corrupt) are listed when present."""
    progress = running_text(list(running), counts[RunState.RUNNING])
    parts = [f"{counts[RunState.DONE]} done", f"{counts[RunState.RUNNING]} running"]
    if progress and counts[RunState.RUNNING]:
        parts[-1] += f" ({progress})"
    shown = ("queued", "held", RunState.DEAD, RunState.CORRUPT, RunState.STALE)
    parts += [f"{counts[k]} {k}" for k in shown if counts[k]]
    parts += [
        f"{counts[RunState.FAILED]} failed",
        f"{counts[RunState.PENDING]} pending (of {total})",
    ]
    eta = "?" if eta_s is None else fmt_duration(eta_s)
    return ", ".join(parts) + f"; ETA {eta}"


class LiveSummary:
    """Prints the summary line when the counts change (at most every ``min_gap_s``) and at
    least every ``every_s`` (with the running runs' progress and the ETA of that moment)."""

    def __init__(
        self, total: int, stream: TextIO | None = None, min_gap_s: float = 1.0, every_s=30.0
    ):
        self.total, self.stream = total, stream or sys.stderr
        self.min_gap_s, self.every_s = min_gap_s, every_s
        self.last_counts: Counter | None = None
        self.last_time = 0.0

    def update(
        self,
        counts: Counter,
        eta_s: float | None,
        force: bool = False,
        running: Sequence[Live] = (),
    ) -> None:
        now = time.monotonic()
        changed = counts != self.last_counts
        if (
            (force and changed)
            or (changed and now - self.last_time >= self.min_gap_s)
            or (now - self.last_time >= self.every_s)
        ):
            text = summary_line(counts, self.total, eta_s, running)
            print(f"[sweep] {text}", file=self.stream, flush=True)
            self.last_counts, self.last_time = Counter(counts), now


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


def _held_note(run_dir: Any) -> str:
    """``pid 123 on host`` of the process that holds a run (what its status says)."""
    with contextlib.suppress(Exception):
        status = run_dir.status()
        if status.get("pid"):
            return f"pid {status['pid']} on {status.get('host', '?')}"
    return "another process"


def schedule(
    launcher: Launcher,
    configs: list[RunConfig],
    store: RunStore,
    labels: dict[str, str] | None = None,
    retry_failed: bool = False,
    max_attempts: int = MAX_ATTEMPTS,
    fail_fast: bool = False,
    should_stop: Any = lambda: False,
    live: LiveSummary | None = None,
    wait_for_held: bool = True,
) -> Sweep:
    """Run ``configs`` through ``launcher``; returns when every run has ended (or, for a
    launcher that can detach, when asked to stop).

    A run that another live process holds (a second ``bench run`` of an overlapping grid) is
    waited for, with a note, and then taken over if it is not done (resumed from its
    checkpoint); with ``wait_for_held=False`` it is reported as ``running`` at once."""
    labels = labels or {}
    live = live or LiveSummary(len(configs))
    outcomes: dict[str, Outcome] = {}
    queue: list[Task] = []
    held: dict[str, Task] = {}  # run id -> the run we wait for another process to release
    sweep = Sweep([])

    def label(config: RunConfig) -> str:
        return labels.get(config.run_id, config.run_id)

    def hold(task: Task) -> None:
        run_dir = store.run(task.run_id)
        if not wait_for_held:
            note = f"held by {_held_note(run_dir)}; not waited for (--no-wait)"
            print(f"    {task.label}: {note}", file=sys.stderr, flush=True)
            outcomes[task.run_id] = Outcome(task.config, run_dir, RunState.RUNNING, note)
            return
        note = f"held by {_held_note(run_dir)}: waiting for it (--no-wait: do not wait)"
        print(f"    {task.label}: {note}", file=sys.stderr, flush=True)
        held[task.run_id] = task

    def settle(config: RunConfig, decision: Any) -> None:
        """Queue a run the decision says to train; else record its outcome."""
        run_dir = store.run(config.run_id)
        if decision.run:
            queue.append(Task(config, label(config)))
        elif decision.state is RunState.RUNNING:
            hold(Task(config, label(config)))
        else:
            record_decision(run_dir, decision)  # a dead run given up on is failed for all
            if decision.state is RunState.CORRUPT:  # the file and the fix, in full
                print(f"    CORRUPT {label(config)}: {decision.note}", file=sys.stderr, flush=True)
            result = run_dir.result() if decision.state is RunState.DONE else None
            outcomes[config.run_id] = Outcome(
                config, run_dir, decision.state, decision.note, result
            )

    for config in configs:
        settle(config, decide(store.run(config.run_id), retry_failed, max_attempts))
    kinds = {config.run_id: run_kind(config.dataset, config.method) for config in configs}
    finished: list[tuple[str, float]] = []  # (kind, wall seconds) of the runs done here
    not_started: list[Task] = []
    halted = False
    progress: dict[str, Live | None] = {}
    watched_at = 0.0

    def watch() -> None:
        """Every ``WATCH_EVERY_S``: the running runs' progress, and the held runs released."""
        nonlocal watched_at
        if time.monotonic() - watched_at < WATCH_EVERY_S:
            return
        watched_at = time.monotonic()
        progress.clear()
        for run_id, state in launcher.active().items():
            if state == RunState.RUNNING:
                with contextlib.suppress(Exception):  # a torn or foreign file: no progress
                    progress[run_id] = Live.from_status(store.run(run_id).status())
                progress.setdefault(run_id, None)
        for run_id, task in list(held.items()):
            decision = decide(store.run(run_id), retry_failed, max_attempts)
            if decision.state is not RunState.RUNNING or decision.run:
                del held[run_id]
                print(f"    {task.label}: released ({decision.state})", file=sys.stderr)
                settle(task.config, decision)

    def counts() -> Counter:
        c: Counter = Counter()
        for o in outcomes.values():
            c[COUNTED_AS.get(o.state, o.state)] += 1
        c.update(launcher.active().values())
        c[RunState.PENDING] += len(queue) + len(not_started)
        c["held"] += len(held)
        return c

    def report(force: bool = False) -> None:
        c = counts()
        active = launcher.active()
        running = [
            (kinds[r], progress.get(r)) for r, state in active.items() if state == RunState.RUNNING
        ]
        waiting: list[str | None] = [kinds[t.run_id] for t in (*queue, *not_started)]
        waiting += [kinds[r] for r in held] + [
            kinds[r] for r, s in active.items() if s != RunState.RUNNING
        ]
        waiting += [None] * max(0, c[RunState.PENDING] + c["queued"] + c["held"] - len(waiting))
        eta = sweep_eta(finished, waiting, running, launcher.parallelism())
        live.update(c, eta, force, [p for _, p in running if p is not None])

    while queue or held or launcher.active():
        stop_signal = getattr(launcher, "stop_signal", None)
        if (should_stop() or stop_signal) and not halted:
            halted, sweep.stopped, sweep.signal = True, "signal", stop_signal
            not_started += queue
            queue.clear()
            for task in held.values():  # no longer waited for: still held elsewhere
                run_dir = store.run(task.run_id)
                note = f"held by {_held_note(run_dir)}; not waited for (stopped)"
                outcomes[task.run_id] = Outcome(task.config, run_dir, RunState.RUNNING, note)
            held.clear()
            message = launcher.detach()
            if message:
                sweep.stopped = f"detached: {message}"
                break
            launcher.stop()
        if not halted and queue and (n := launcher.free()) > 0:
            batch, queue[:] = queue[:n], queue[n:]
            now = time.time()
            for task in batch:
                task.started = now
            launcher.start(batch)
        for ended in launcher.poll():
            task = ended.task
            run_dir = store.run(task.run_id)
            if ended.state == RunState.DONE and ended.ran and task.started:
                finished.append((kinds[task.run_id], time.time() - task.started))
            if (
                ended.state == RunState.FAILED
                and ended.ran
                and retry_failed
                and not halted
                and decide(run_dir, True, max_attempts).run
            ):
                sweep.retried.append(task.run_id)
                print(f"    retrying {task.label}: {ended.note}", file=sys.stderr, flush=True)
                queue.append(task)
                continue
            if ended.state == RunState.RUNNING and not ended.ran and not halted:
                hold(task)  # another process took it between our decision and our start
                continue
            done = ended.state == RunState.DONE
            result = ended.result or (run_dir.result() if done else None)
            outcomes[task.run_id] = Outcome(
                task.config, run_dir, ended.state, ended.note, result, ran=ended.ran
            )
            if ended.state == RunState.DEAD:
                print(f"    DIED {task.label}: {ended.note}", file=sys.stderr, flush=True)
            if ended.state == RunState.FAILED and ended.ran:
                print(f"    FAILED {task.label}: {ended.note}", file=sys.stderr, flush=True)
                if fail_fast and not halted:
                    halted, sweep.stopped = True, "fail-fast"
                    not_started += queue
                    queue.clear()
                    launcher.stop()
        watch()
        report()
        if queue or held or launcher.active():
            idle = not launcher.active() and (halted or not queue)
            time.sleep(max(launcher.poll_interval_s, 0.5 if idle else 0.0))
    report(force=True)
    launcher.close()
    for task in not_started:  # halted or detached before they started
        outcomes.setdefault(
            task.run_id,
            Outcome(task.config, store.run(task.run_id), RunState.PENDING, "not started"),
        )
    for run_id, state in launcher.active().items():
        config = next(c for c in configs if c.run_id == run_id)
        outcomes.setdefault(
            run_id,
            Outcome(config, store.run(run_id), RunState.RUNNING, f"still in SLURM ({state})"),
        )
    sweep.outcomes = [outcomes[c.run_id] for c in configs if c.run_id in outcomes]
    return sweep
