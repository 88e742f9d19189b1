"""The sweep loop's bookkeeping (``debias_bench.launchers.scheduler``) with a fake launcher:
a run held by another process that is released after a fail-fast stop is reported as not
started, and the sweep ends (it never waits for a start that the stop forbids); and the final
table and count line of ``bench run`` (``debias_bench.commands.run``)."""

from __future__ import annotations

import contextlib
import io

from support.planted import plant

from debias_bench.config.run_config import make_config
from debias_bench.launchers.run_one import Outcome
from debias_bench.launchers.scheduler import Ended, Launcher, LiveSummary, Task, schedule
from debias_bench.reporting.format import short_note
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.run import ran_line, summary


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


def _outcomes(store: RunStore, states: list[tuple[RunState, bool, str]]) -> list[Outcome]:
    out = []
    for seed, (state, ran, note) in enumerate(states):
        config = make_config("vanilla", "toy", 5.0, seed)
        out.append(Outcome(config, store.run(config.run_id), state, note, ran=ran))
    return out


def test_the_final_table_of_a_stopped_sweep_folds_its_pending_runs_and_counts_interruptions(
    tmp_path,
):
    """Issue 39: "5 ran, 0 failed" with one of the five interrupted; a note cut inside a
    clause; every pending run of a stopped sweep listed."""
    store = RunStore(tmp_path)
    long_note = (
        "the worker server died (SIGKILL) during the run; stopped at step 18; rerun to resume"
    )
    states = [(RunState.DONE, True, "")] * 4 + [(RunState.INTERRUPTED, True, long_note)]
    outcomes = _outcomes(store, [*states, *[(RunState.PENDING, False, "not started")] * 38])
    assert ran_line(outcomes) == "5 ran, 0 failed, 1 interrupted"
    table = summary(outcomes)
    lines = table.splitlines()
    assert len(lines) == 2 + 5 + 1  # header, rule, the five runs that ran, the count
    assert lines[-1] == "38 runs not started (pending): rerun the same command to start them"
    note = lines[6].split("|")[-2].strip()
    assert note == "the worker server died (SIGKILL) during the run; stopped at step 18 ..."
    only_pending = summary(outcomes[5:6])
    assert only_pending == "1 run not started (pending): rerun the same command to start them"


def test_a_note_is_shortened_at_a_clause_boundary_never_inside_one():
    assert short_note("stopped at step 1; rerun to resume") == "stopped at step 1; rerun to resume"
    note = "did not reach its next step within --grace 1 s of the stop; a rerun resumes from it"
    assert (
        short_note(note, width=40)
        == "did not reach its next step within --grace 1 s of the stop ..."
    )
    one_clause = "x" * 100  # no boundary: whole, not cut
    assert short_note(one_clause, width=40) == one_clause
    assert short_note("first line\nsecond line") == "first line"
    stale = "stale: code changed since its result was written (code 47f94f19c4 -> 5851ad7cdb)"
    assert short_note(stale, width=40) == stale  # a label keeps what it introduces
    assert short_note(f"{stale}; rerun it", width=40) == f"{stale} ..."
    assert short_note("") == ""
    for width in range(10, 90, 7):  # every shortening ends at a clause boundary
        for text in (note, "a; b c d; e f g h: i j k. l m n o p q r s t u v w x y z 1 2 3 4 5"):
            short = short_note(text, width)
            kept = short.removesuffix(" ...")
            assert text.startswith(kept) and (kept == text or text[len(kept)] in ";:. ")
