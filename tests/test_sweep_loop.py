"""The sweep loop's bookkeeping (``debias_bench.launchers.scheduler``) with a fake launcher:
a run held by another process that is released after a fail-fast stop is reported as not
started, and the sweep ends (it never waits for a start that the stop forbids)."""

from __future__ import annotations

import contextlib
import io

from planted import plant

from debias_bench.config import make_config
from debias_bench.launchers.scheduler import Ended, Launcher, LiveSummary, Task, schedule
from debias_bench.states import RunState
from debias_bench.store import RunStore


class _FailsThenReleases(Launcher):
    """Ends every run it starts as failed; on that first end, lets go of ``release``."""

    poll_interval_s = 0.0

    def __init__(self, release: contextlib.ExitStack) -> None:
        self.release, self.now, self.started = release, list[Task](), list[str]()
        self.polls = 0

    def free(self) -> int:
        return 1 - len(self.now)

    def start(self, tasks: list[Task]) -> None:
        self.now += tasks
        self.started += [t.run_id for t in tasks]

    def poll(self) -> list[Ended]:
        self.polls += 1
        assert self.polls < 20, "the sweep goes on waiting for a run it may not start"
        ended = [Ended(task, RunState.FAILED, "scripted failure") for task in self.now]
        self.now = []
        if ended:
            self.release.close()  # the other process ends without recording an outcome
        return ended

    def active(self) -> dict[str, str]:
        return dict.fromkeys((t.run_id for t in self.now), "running")

    def stop(self) -> None:
        pass


def test_a_held_run_released_after_fail_fast_is_not_started(tmp_path):
    store = RunStore(tmp_path)
    failing = make_config("vanilla", "toy", 5.0, 0)
    held = plant(store, seed=1)
    held.transition(RunState.RUNNING, attempt=1)  # "another process" runs it: we hold its lock
    with contextlib.ExitStack() as other_process:
        assert other_process.enter_context(held.claim())
        launcher = _FailsThenReleases(other_process.pop_all())
        configs = [failing, make_config("vanilla", "toy", 5.0, 1)]
        sweep = schedule(
            launcher, configs, store, fail_fast=True, live=LiveSummary(2, io.StringIO())
        )
    assert sweep.stopped == "fail-fast" and launcher.started == [failing.run_id]
    assert [(o.state, o.note) for o in sweep.outcomes] == [
        (RunState.FAILED, "scripted failure"),
        (RunState.PENDING, "not started"),
    ]
