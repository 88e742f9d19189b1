"""``--launcher inline`` (the default): runs one after another in the ``bench`` process itself.

The simplest and cheapest launcher (the dataset is loaded once for consecutive runs); a
Python error in a run is recorded and the sweep goes on, but a crash of the interpreter
takes the sweep with it: use ``--launcher local`` for isolation.

Ctrl-C behaves as under the other launchers: the running run checkpoints at its current step
and ends ``interrupted`` (a rerun resumes it), no traceback, and the sweep stops
(:attr:`InlineLauncher.stop_signal`). A second Ctrl-C stops at once, from the last checkpoint.
A ``kill -9`` of the process leaves the run ``dead``; a plain rerun resumes it.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from debias_bench.engine import DataPlace, Interrupted, Progress
from debias_bench.states import RunState
from debias_bench.store import RunStore
from debias_bench.sweep import run_one, worker_identity
from debias_bench.tracking import TrackSpec

from .scheduler import Ended, Launcher, Task


class InlineLauncher(Launcher):
    name = "inline"
    poll_interval_s = 0.0

    def __init__(
        self,
        store: RunStore,
        place: DataPlace,
        device: torch.device,
        progress: Callable[[Task], Progress],
        should_stop: Callable[[], bool],
        max_attempts: int = 3,
        track: Sequence[TrackSpec] = (),
    ) -> None:
        self.store, self.place, self.device = store, place, device
        self.progress, self.should_stop = progress, should_stop
        self.max_attempts, self.track = max_attempts, track
        self.ended: list[Ended] = []
        #: SIGINT once Ctrl-C asked the sweep to stop (the scheduler reads it)
        self.stop_signal: int | None = None
        self._catching = False
        self._previous_handler: Any = None

    def free(self) -> int:
        return 1

    def _on_ctrl_c(self, signum: int, _frame: Any) -> None:
        if self.stop_signal is not None:
            raise KeyboardInterrupt  # the second one: stop now
        self.stop_signal = signum
        print("\nCtrl-C: checkpointing at the next step (again: stop now)", file=sys.stderr)

    def _catch_ctrl_c(self) -> None:
        """Handle Ctrl-C from the first run until :meth:`close` (main thread only)."""
        if not self._catching and threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGINT, self._on_ctrl_c)
            self._catching = True

    def start(self, tasks: list[Task]) -> None:
        self._catch_ctrl_c()
        for task in tasks:
            if self.stop_signal is not None:
                self.ended.append(Ended(task, RunState.PENDING, "not started (Ctrl-C)", ran=False))
                continue
            print(task.label, file=sys.stderr, flush=True)
            try:
                outcome = run_one(
                    task.config,
                    self.store,
                    self.place,
                    self.device,
                    self.progress(task),
                    retry_failed=True,  # the scheduler decided
                    should_stop=lambda step: self.should_stop() or self.stop_signal is not None,
                    max_attempts=self.max_attempts,
                    status_fields={**worker_identity(), "launcher": self.name},
                    track=self.track,
                )
            except Interrupted as exc:
                self.ended.append(Ended(task, RunState.INTERRUPTED, str(exc)))
                continue
            except KeyboardInterrupt:  # a second Ctrl-C: the run recorded its interruption
                note = "stopped by a second Ctrl-C; a rerun resumes from its last checkpoint"
                self.ended.append(Ended(task, RunState.INTERRUPTED, note))
                continue
            self.ended.append(Ended(task, outcome.state, outcome.note, outcome.ran, outcome.result))

    def poll(self) -> list[Ended]:
        ended, self.ended = self.ended, []
        return ended

    def active(self) -> dict[str, str]:
        return {}

    def stop(self) -> None: ...

    def close(self) -> None:
        if self._catching:
            previous = self._previous_handler
            signal.signal(
                signal.SIGINT, signal.default_int_handler if previous is None else previous
            )
            self._catching = False
