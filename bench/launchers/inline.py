"""``--launcher inline`` (the default): runs one after another in the ``bench`` process itself.

The simplest and cheapest launcher (the dataset is loaded once for consecutive runs); a
Python error in a run is recorded and the sweep goes on, but a crash of the interpreter
takes the sweep with it: use ``--launcher local`` for isolation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from debias_bench.engine import DataPlace, Interrupted, Progress
from debias_bench.store import RunStore
from debias_bench.sweep import run_one, worker_identity

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
    ) -> None:
        self.store, self.place, self.device = store, place, device
        self.progress, self.should_stop = progress, should_stop
        self.max_attempts = max_attempts
        self.ended: list[Ended] = []

    def free(self) -> int:
        return 1

    def start(self, tasks: list[Task]) -> None:
        for task in tasks:
            print(task.label, file=sys.stderr, flush=True)
            try:
                outcome = run_one(
                    task.config,
                    self.store,
                    self.place,
                    self.device,
                    self.progress(task),
                    retry_failed=True,  # the scheduler decided
                    should_stop=lambda step: self.should_stop(),
                    max_attempts=self.max_attempts,
                    status_fields={**worker_identity(), "launcher": self.name},
                )
            except Interrupted as exc:
                self.ended.append(Ended(task, "interrupted", str(exc)))
                continue
            self.ended.append(Ended(task, outcome.state, outcome.note, outcome.ran, outcome.result))

    def poll(self) -> list[Ended]:
        ended, self.ended = self.ended, []
        return ended

    def active(self) -> dict[str, str]:
        return {}

    def stop(self) -> None: ...
