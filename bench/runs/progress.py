"""A running run's progress: the callbacks the engine calls (:class:`Progress`), its pace
(steps/s, ETA), its progress lines in a log file, and a sweep's summary line.

:class:`Pace` times the steps since a run (re)started, from the end of its first step (set-up
excluded, evaluations included, so the ETA is wall time). :class:`LogLines` prints a line at
the first step, then at most every ``every_s`` (a step line, or the latest evaluation), and
the last evaluation: what a log (CI, SLURM, a worker's ``stderr.log``) should show, where a
progress bar's carriage returns would be noise. :class:`LiveSummary` prints a sweep's counts
per state with the running runs' progress and the sweep's ETA
(:func:`debias_bench.runs.eta.time_left`).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from debias_bench.runs.states import RunState


class Progress:
    """Callbacks the engine calls; the CLI shows them as bars or log lines."""

    def start(self, run_id: str, total_steps: int, start_step: int) -> None: ...

    def advance(self, step: int) -> None: ...

    def evaluated(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def fmt_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Pace:
    """Steps per second and time left of a run, from the steps it made since it started."""

    def __init__(self, total: int = 0, start_step: int = 0) -> None:
        self.total, self.step, self.first_step = total, start_step, start_step
        self.first_at: float | None = None  # when the first step of this start ended

    def advance(self, step: int) -> bool:
        """Record ``step``; True on the first step of this start."""
        self.step = step
        if self.first_at is None:
            self.first_at, self.first_step = time.time(), step - 1
            return True
        return False

    def steps_per_s(self) -> float | None:
        done = self.step - self.first_step - 1  # steps after the first one
        if self.first_at is None or done < 1:
            return None
        return done / max(time.time() - self.first_at, 1e-9)

    def eta_s(self) -> float | None:
        rate = self.steps_per_s()
        return None if rate is None else (self.total - self.step) / rate

    def fields(self) -> dict[str, Any]:
        """For status.json: step, total_steps, steps_per_s and eta_s (None until known, so a
        resumed run's status never shows the pace its interrupted start had reached)."""
        rate, eta = self.steps_per_s(), self.eta_s()
        return {
            "step": self.step,
            "total_steps": self.total,
            "steps_per_s": None if rate is None else round(rate, 3),
            "eta_s": None if eta is None else round(eta, 1),
        }

    def text(self) -> str:
        """``step 120/240 (50 %), 35.2 steps/s, ETA 3s``."""
        pct = 100 * self.step / max(1, self.total)
        text = f"step {self.step}/{self.total} ({pct:.0f} %)"
        rate, eta = self.steps_per_s(), self.eta_s()
        if rate is not None and eta is not None:
            text += f", {rate:.3g} steps/s, ETA {fmt_duration(eta)}"
        return text


def eval_text(record: dict[str, Any]) -> str:
    test = record["test"]
    return f"test {test['accuracy']:.1f} | confl {test.get('conflicting_accuracy') or 0:.1f}"


class LogLines(Progress):
    """Progress lines for a log, each after ``prefix``: the first step, then at most every
    ``every_s`` (the latest evaluation's accuracy with it when there is one), and the end."""

    def __init__(self, prefix: str, every_s: float = 30.0, stream: TextIO | None = None) -> None:
        self.prefix, self.every_s, self.stream = prefix, every_s, stream
        self.pace = Pace()
        self.last = 0.0

    def _print(self, text: str) -> None:
        self.last = time.monotonic()
        print(f"{self.prefix}{text}", file=self.stream or sys.stderr, flush=True)

    def start(self, run_id: str, total_steps: int, start_step: int) -> None:
        self.pace = Pace(total_steps, start_step)
        if start_step:
            self._print(f"resuming at step {start_step}/{total_steps}")

    def advance(self, step: int) -> None:
        first = self.pace.advance(step)
        if first or time.monotonic() - self.last >= self.every_s:
            self._print(self.pace.text())

    def evaluated(self, record: dict[str, Any]) -> None:
        if record["step"] == self.pace.total or time.monotonic() - self.last >= self.every_s:
            self._print(f"{self.pace.text()}: {eval_text(record)}")


# ------------------------------------------------------------------ what other processes see
@dataclass(frozen=True)
class Live:
    """A running run's progress as its heartbeat last reported it (``status.json``)."""

    step: int
    total: int
    steps_per_s: float | None = None
    eta_s: float | None = None  # from now (the time since the heartbeat is taken off)
    elapsed_s: float | None = None  # since this start of the run

    @classmethod
    def from_status(cls, status: dict[str, Any], now: float | None = None) -> Live | None:
        """None unless the status is a running run's that reported its total steps."""
        if status.get("state") != RunState.RUNNING or not status.get("total_steps"):
            return None
        now = time.time() if now is None else now
        eta = status.get("eta_s")
        if eta is not None:
            eta = max(0.0, float(eta) - max(0.0, now - float(status.get("heartbeat") or now)))
        started = status.get("started")
        return cls(
            int(status.get("step") or 0),
            int(status["total_steps"]),
            status.get("steps_per_s"),
            eta,
            None if started is None else max(0.0, now - float(started)),
        )

    def text(self) -> str:
        """``step 120/240, 35.2 steps/s, ETA 4s`` (what is known)."""
        parts = [f"step {self.step}/{self.total}"]
        if self.steps_per_s:
            parts.append(f"{self.steps_per_s:.3g} steps/s")
        if self.eta_s is not None:
            parts.append(f"ETA {fmt_duration(self.eta_s)}")
        return ", ".join(parts)


def running_text(running: list[Live], count: int | None = None) -> str:
    """The progress of the ``count`` running runs (default: as many as reported) for a
    summary line: one run's own, or the sum of those that reported."""
    if not running:
        return ""
    if len(running) == 1 and count in (None, 1):
        return running[0].text()
    done = sum(r.step for r in running) / max(1, sum(r.total for r in running))
    rate = sum(r.steps_per_s or 0.0 for r in running)
    return f"{100 * done:.0f} % of their steps" + (f", {rate:.3g} steps/s" if rate else "")


# ------------------------------------------------------------------ a sweep's summary line
#: what ``bench status`` counts a run as whose method or dataset no loaded plugin registers
UNLOADED = "not loaded"


def summary_line(
    counts: Counter, total: int, eta_s: float | None, running: Sequence[Live] = ()
) -> str:
    """``3 done, 1 running (step 120/240, 35 steps/s, ETA 4s), 1 failed, 4 pending (of 10);
    ETA 5m00s``; other states (queued, held, dead, corrupt, stale, not loaded) are listed when
    present."""
    progress = running_text(list(running), counts[RunState.RUNNING])
    parts = [f"{counts[RunState.DONE]} done", f"{counts[RunState.RUNNING]} running"]
    if progress and counts[RunState.RUNNING]:
        parts[-1] += f" ({progress})"
    shown = ("queued", "held", RunState.DEAD, RunState.CORRUPT, RunState.STALE, UNLOADED)
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
        self,
        total: int,
        stream: TextIO | None = None,
        min_gap_s: float = 1.0,
        every_s: float = 30.0,
    ) -> None:
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
