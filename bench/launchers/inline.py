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

import argparse
import signal
import sys
import threading
from typing import Any

import torch

from debias_bench.engine import Interrupted, resolve_device
from debias_bench.errors import ConfigError
from debias_bench.states import RunState
from debias_bench.sweep import run_one, worker_identity

from .factories import Launchable, LaunchContext, register_launcher
from .scheduler import Ended, Launcher, Task
from .slots import Slot, crowding_now


@register_launcher(
    "inline",
    display_name="in this process, one run after another",
    where="in this process on {device}",
    catches_sigint=True,
    kill_on_second_signal=False,
)
class InlineLauncher(Launchable):
    poll_interval_s = 0.0

    def __init__(self, ctx: LaunchContext, device: torch.device) -> None:
        self.ctx, self.device = ctx, device
        self.ended: list[Ended] = []
        #: SIGINT once Ctrl-C asked the sweep to stop (the scheduler reads it)
        self.stop_signal: int | None = None
        self._catching = False
        self._previous_handler: Any = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, ctx: LaunchContext) -> Launcher:
        if ctx.timeout_s:
            raise ConfigError("--timeout needs --launcher local or slurm (a run in a process)")
        return cls(ctx, resolve_device(ctx.device))

    def free(self) -> int:
        return 1

    def crowding(self) -> str | None:
        if self.device.type != "cpu":
            return None
        return crowding_now([Slot(0, None, torch.get_num_threads())])

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
                    self.ctx.store,
                    self.ctx.place,
                    self.device,
                    self.ctx.progress(task),
                    retry_failed=True,  # the scheduler decided
                    should_stop=lambda step: self.ctx.should_stop() or self.stop_signal is not None,
                    max_attempts=self.ctx.max_attempts,
                    status_fields={**worker_identity(), "launcher": self.name},
                    track=self.ctx.track,
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
