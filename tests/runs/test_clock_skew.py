"""A heartbeat from the future (a node whose clock is fast) does not keep a dead run
``running``: past :data:`STALE_AFTER_S` ahead of this clock it is not believed, and how long
``status.json`` has gone unwritten, as seen from here, decides. ``bench status`` and a sweep
agree, and the note says why."""

from __future__ import annotations

import os
import time

import pytest
from support.scripted import bench_args, statuses

from debias_bench.runs.jsonio import write_json
from debias_bench.runs.states import STALE_AFTER_S, Facts, RunState, effective_state
from debias_bench.runs.store import RunStore

AHEAD_S = 3600.0  # node42's clock is an hour fast
INLINE = ["--launcher", "inline", "--no-wait"]


@pytest.mark.parametrize(
    "heartbeat_age_s,written_age_s,expected",
    [
        (-AHEAD_S, 5.0, RunState.RUNNING),  # it still writes: alive, its clock is fast
        (-AHEAD_S, STALE_AFTER_S + 1, RunState.DEAD),  # nothing written for too long: dead
        (-AHEAD_S, None, RunState.DEAD),  # when status.json was written is not known
        (-AHEAD_S, -AHEAD_S, RunState.DEAD),  # written "in the future" here too: no trust
        (-STALE_AFTER_S / 2, STALE_AFTER_S + 1, RunState.RUNNING),  # a small skew: believed
    ],
)
def test_a_heartbeat_from_the_future_is_judged_by_when_status_was_written(
    heartbeat_age_s, written_age_s, expected
):
    facts = Facts(
        RunState.RUNNING,
        result_ok=False,
        same_host=False,
        heartbeat_age_s=heartbeat_age_s,
        written_age_s=written_age_s,
    )
    assert effective_state(facts) is expected


@pytest.mark.parametrize("dead", [True, False])
def test_a_dead_run_with_a_heartbeat_from_the_future_is_resumed(tmp_path, in_process, dead):
    """Its status says running on node42 (pid 999999) with a heartbeat an hour ahead of this
    clock. Not written for longer than the bound: dead for `bench status` and the sweep, which
    resumes it and says why; written just now: still held, by both."""
    out = tmp_path / "runs"
    code, _, err = in_process("run", *bench_args(out, "5"), *INLINE)  # flaky: fails once
    assert code == 1 and statuses(out)[5.0]["state"] == "failed", err
    (run,) = RunStore(out).runs()
    write_json(
        run.status_path,
        {**run.status(), "state": "running", "host": "node42", "pid": 999999,
         "heartbeat": time.time() + AHEAD_S},
    )  # fmt: skip
    if dead:
        then = time.time() - STALE_AFTER_S - 60
        os.utime(run.status_path, (then, then))

    code, report, _ = in_process("status", "--out", str(out))
    assert code == 0 and ("1 dead" if dead else "1 running") in report, report
    code, _, err = in_process("run", *bench_args(out, "5"), *INLINE)
    if not dead:
        assert code == 1 and "held by pid 999999 on node42" in err, err
        assert "ahead of this host's clock, a clock skew" in err
        return
    assert code == 0 and run.effective_state() is RunState.DONE, err
    note = run.status()["note"]
    assert note.startswith("its process died (its heartbeat is 36") and "clock skew" in note
