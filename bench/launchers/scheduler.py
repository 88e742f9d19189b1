"""The sweep loop, the same for every launcher: decide, launch, watch, retry, summarise.

A launcher only knows how to start runs and tell when they ended (:class:`Launcher`); the
scheduler decides which runs to start (:func:`~debias_bench.sweep.decide`), retries failures
with ``retry_failed`` up to ``max_attempts``, stops everything on the first failure with
``fail_fast`` (running runs checkpoint and stay resumable), and prints a live summary line
(done / running / queued / failed / pending, ETA) as states change.
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

from debias_bench.config import RunConfig
from debias_bench.states import RunState
from debias_bench.store import RunStore
from debias_bench.sweep import MAX_ATTEMPTS, Outcome, decide


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


def _fmt_duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def eta_seconds(durations: list[float], remaining: int, parallel: int) -> float | None:
    """Remaining runs x mean run time / runs at once; None before any run finished."""
    if not durations or remaining <= 0:
        return None if remaining > 0 else 0.0
    return sum(durations) / len(durations) * remaining / max(1, parallel)


def summary_line(counts: Counter, total: int, eta_s: float | None) -> str:
    """``3 done, 2 running, 1 failed, 4 pending (of 10); ETA 5m00s``; other states (queued,
    dead) are listed when present."""
    parts = [f"{counts['done']} done", f"{counts['running']} running"]
    parts += [f"{counts[k]} {k}" for k in ("queued", "dead", "corrupt") if counts[k]]
    parts += [f"{counts['failed']} failed", f"{counts['pending']} pending (of {total})"]
    eta = "?" if eta_s is None else _fmt_duration(eta_s)
    return ", ".join(parts) + f"; ETA {eta}"


class LiveSummary:
    """Prints the summary line when the counts change (at most every ``min_gap_s``) and at
    least every ``every_s``."""

    def __init__(
        self, total: int, stream: TextIO | None = None, min_gap_s: float = 1.0, every_s=30.0
    ):
        self.total, self.stream = total, stream or sys.stderr
        self.min_gap_s, self.every_s = min_gap_s, every_s
        self.last_text, self.last_time = "", 0.0

    def update(self, counts: Counter, eta_s: float | None, force: bool = False) -> None:
        text = summary_line(counts, self.total, eta_s)
        now = time.monotonic()
        changed = text.split(";")[0] != self.last_text.split(";")[0]
        if (
            (force and changed)
            or (changed and now - self.last_time >= self.min_gap_s)
            or (now - self.last_time >= self.every_s)
        ):
            print(f"[sweep] {text}", file=self.stream, flush=True)
            self.last_text, self.last_time = text, now


@dataclass
class Sweep:
    """What happened in one ``bench run``: outcomes in grid order, and why it stopped."""

    outcomes: list[Outcome]
    stopped: str | None = None  # 'fail-fast' | 'signal' | 'detached: ...'
    retried: list[str] = field(default_factory=list)


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
) -> Sweep:
    """Run ``configs`` through ``launcher``; returns when every run has ended (or, for a
    launcher that can detach, when asked to stop)."""
    labels = labels or {}
    live = live or LiveSummary(len(configs))
    outcomes: dict[str, Outcome] = {}
    queue: list[Task] = []
    for config in configs:
        run_dir = store.run(config.run_id)
        decision = decide(run_dir, retry_failed, max_attempts)
        if decision.run:
            queue.append(Task(config, labels.get(config.run_id, config.run_id)))
        else:
            if decision.state is RunState.CORRUPT:  # the file and the fix, in full
                label = labels.get(config.run_id, config.run_id)
                print(f"    CORRUPT {label}: {decision.note}", file=sys.stderr, flush=True)
            result = run_dir.result() if decision.state is RunState.DONE else None
            outcomes[config.run_id] = Outcome(
                config, run_dir, decision.state, decision.note, result
            )
    durations: list[float] = []
    not_started: list[Task] = []
    sweep = Sweep([])
    halted = False

    def counts() -> Counter:
        c: Counter = Counter()
        for o in outcomes.values():
            c[{"skipped": "done", "interrupted": "pending"}.get(o.state, o.state)] += 1
        c.update(launcher.active().values())
        c["pending"] += len(queue) + len(not_started)
        return c

    def remaining() -> int:
        c = counts()
        return c["pending"] + c["queued"] + c["running"]

    while queue or launcher.active():
        if should_stop() and not halted:
            halted, sweep.stopped = True, "signal"
            not_started += queue
            queue.clear()
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
                durations.append(time.time() - task.started)
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
            done = ended.state == RunState.DONE
            result = ended.result or (run_dir.result() if done else None)
            outcomes[task.run_id] = Outcome(
                task.config, run_dir, ended.state, ended.note, result, ran=ended.ran
            )
            if ended.state == RunState.FAILED and ended.ran:
                print(f"    FAILED {task.label}: {ended.note}", file=sys.stderr, flush=True)
                if fail_fast and not halted:
                    halted, sweep.stopped = True, "fail-fast"
                    not_started += queue
                    queue.clear()
                    launcher.stop()
        live.update(counts(), eta_seconds(durations, remaining(), launcher.parallelism()))
        if queue or launcher.active():
            time.sleep(launcher.poll_interval_s)
    live.update(counts(), eta_seconds(durations, remaining(), launcher.parallelism()), force=True)
    launcher.close()
    for task in not_started:  # halted or detached before they started
        outcomes.setdefault(
            task.run_id,
            Outcome(task.config, store.run(task.run_id), RunState.PENDING, "not started"),
        )
    for run_id, state in launcher.active().items():
        config = next(c for c in configs if c.run_id == run_id)
        outcomes.setdefault(run_id, Outcome(config, store.run(run_id), state, "still in SLURM"))
    sweep.outcomes = [outcomes[c.run_id] for c in configs if c.run_id in outcomes]
    return sweep
