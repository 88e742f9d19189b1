"""The local launcher end to end: a matrix of scripted runs that succeed, fail, hang past the
timeout, die by a signal or fail once; retries and attempt caps; ``kill -9`` of a sweep and
its resumption; ``bench status`` from another process.

The runs are real (Vanilla on a tiny in-memory dataset, "scripted"); what each one does is
scripted by its ratio through the training images it reads (see ``support.scripted``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from support.planted import finish_running, plant
from support.processes import bench_env
from support.scripted import BEHAVIOURS, _wait_for, bench_args, statuses  # noqa: F401

from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.status import collect


# ------------------------------------------------------------------------------ tests
def test_threads_flag_reaches_the_worker_and_busy_cores_are_named(
    tmp_path, in_process, monkeypatch
):
    cores = len(os.sched_getaffinity(0))
    busy = (4.0 * cores, 4.0 * cores, 4.0 * cores)  # another sweep's load on every core
    monkeypatch.setattr(os, "getloadavg", lambda: busy)
    out = tmp_path / "runs"
    local = ["--launcher", "local", "--workers", "1", "--threads", "2"]
    code, _, err = in_process("run", *bench_args(out, "1", steps=10), *local)
    assert code == 0, err
    assert statuses(out)[1.0]["threads"] == 2
    assert "warning: the " in err and "oversubscribe" in err and "--threads 1" in err
    code, _, err = in_process("run", *bench_args(out, "1", steps=10), *local)
    assert code == 0 and "0 ran" in err and "warning" not in err  # nothing to run: no warning
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # an inline sweep on two threads of the busy cores: warned too
    try:
        code, _, err = in_process("run", *bench_args(out, "1", seeds="1", steps=10))
    finally:
        torch.set_num_threads(before)
    assert code == 0 and "oversubscribe" in err and "OMP_NUM_THREADS=1" in err
    code, _, err = in_process("run", *bench_args(out, "1"), "--launcher", "local", "--threads", "0")
    assert code == 2 and "--threads" in err and "Traceback" not in err


def effective_states(out: Path) -> dict[float, str]:
    """ratio -> effective state of each run (seed 0) in the store."""
    return {
        d.config()["ratio"]: str(d.effective_state())
        for d in RunStore(out).runs()
        if d.config()["seed"] == 0
    }


@pytest.mark.slow
def test_fake_run_matrix_states_and_retries(tmp_path, in_process, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # the default: cores shared
    out = tmp_path / "runs"
    local = ["--launcher", "local", "--workers", "2", "--timeout", "15", "--grace", "1"]
    code, _, err = in_process("run", *bench_args(out, "1,2,3,4,5"), *local)
    assert code == 1, err
    assert "5 ran, 3 failed" in err and "DIED" in err
    assert "[sweep]" in err and "ETA" in err  # the live summary
    st = statuses(out)
    assert st[1.0]["state"] == "done" and st[1.0]["exit_code"] == 0
    assert st[1.0]["threads"] == max(1, len(os.sched_getaffinity(0)) // 2)
    assert st[2.0]["state"] == "failed" and st[2.0]["exit_code"] == 1
    assert "scripted failure" in st[2.0]["error"]
    assert "RuntimeError: scripted failure" in st[2.0]["stderr_tail"]
    assert st[3.0]["state"] == "failed" and st[3.0]["error"] == "timed out after 15 s (killed)"
    assert st[3.0]["reason"] == "timed out"  # not "crashed"
    assert st[3.0]["exit_code"] == -signal.SIGKILL
    # kill -9 of a run's process: dead, as under the inline launcher; a plain rerun resumes it
    assert effective_states(out)[4.0] == "dead"
    assert st[4.0]["signal"] == "SIGKILL" and st[4.0]["exit_code"] == -signal.SIGKILL
    assert st[4.0]["error"].startswith("worker died (SIGKILL) during the run")
    assert st[5.0]["state"] == "failed"
    assert all(s["attempt"] == 1 for s in st.values())

    # Failures rerun only with --retry-failed; the dead run resumes on a plain rerun (and
    # dies again: it is scripted to); `bench status --failed` explains each one.
    code, _, err = in_process("run", *bench_args(out, "1,2,4,5"), *local)
    assert code == 1 and "1 ran, 2 failed" in err, err
    assert statuses(out)[4.0]["attempt"] == 2 and effective_states(out)[4.0] == "dead"
    code, report, _ = in_process("status", "--out", str(out), "--failed")
    assert code == 0
    assert "timed out after 15 s" in report and "SIGKILL" in report
    assert "RuntimeError: scripted failure" in report  # the stderr tail
    assert "1 done" in report and "3 failed" in report and "1 dead" in report

    # --retry-failed: retried up to --max-attempts, also inside the same sweep.
    retry = ["--retry-failed", "--max-attempts", "3"]
    code, _, err = in_process("run", *bench_args(out, "2,4,5"), *local, *retry)
    assert code == 1, err
    st = statuses(out)
    assert st[5.0]["state"] == "done" and st[5.0]["attempt"] == 2  # flaky: second try works
    assert st[2.0]["state"] == "failed" and st[2.0]["attempt"] == 3
    assert st[4.0]["attempt"] == 3 and effective_states(out)[4.0] == "dead"
    assert err.count("retrying") == 1  # attempts 2 -> 3 of the failing run
    code, table, err = in_process("run", *bench_args(out, "2,4"), *local, *retry)
    assert "0 ran, 2 failed" in err and "its process died; gave up after 3 attempts" in table


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "kill-9-sweep", "kill-9-group"])
def test_stop_or_kill_a_sweep_then_resume(tmp_path, in_process, how):
    """Stop a local sweep midway (SIGTERM; ``kill -9`` of the sweep alone, whose worker then
    checkpoints and stops; ``kill -9`` of its whole process group, worker included), then run
    the same command again: the finished run is not redone, the interrupted one resumes from
    its checkpoint, no metric record is duplicated. Meanwhile ``bench status`` (another
    process) tells the running run from the pending ones, and a dead one is never running."""
    out = tmp_path / "runs"
    args = [*bench_args(out, "6", seeds="0,1", steps=60), "--launcher", "local"]
    sweep = subprocess.Popen(
        [sys.executable, "-m", "debias_bench.cli", "run", *args],
        env=bench_env(tmp_path, SCRIPTED_DELAY_S="0.1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, for kill-9-group
    )
    store = RunStore(out)

    def by_seed() -> dict[int, RunDir]:
        return {d.config()["seed"]: d for d in store.runs()}

    def midway(seed: int) -> bool:
        runs = by_seed()
        return seed in runs and len(runs[seed].metrics()) >= 2 and not runs[seed].is_done()

    try:
        _wait_for(lambda: midway(0), 300, "the first run midway")
        states = sorted(r["state"] for r in collect(store))
        assert states == ["pending", "running"], states  # the second one is planned
        _wait_for(lambda: midway(1), 300, "the first run done and the second one midway")
        runs = by_seed()
        states = {r["run_id"]: r["state"] for r in collect(store)}
        assert states == {runs[0].run_id: "done", runs[1].run_id: "running"}, states
        assert runs[1].lock_held() is True
    finally:
        if how == "sigterm":
            os.kill(sweep.pid, signal.SIGTERM)
        elif how == "kill-9-sweep":
            os.kill(sweep.pid, signal.SIGKILL)
        else:
            os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=120)
    expected = {"sigterm": "interrupted", "kill-9-sweep": "interrupted"}.get(how, "dead")
    _wait_for(lambda: runs[1].effective_state() == expected, 60, expected)
    if how == "sigterm":
        assert sweep.returncode == 128 + signal.SIGTERM  # it waited for its worker
    first_result = runs[0].result_path.stat().st_mtime_ns
    stopped_at = runs[1].metrics()[-1]["step"]
    assert 0 < stopped_at < 60

    code, _, err = in_process("run", *args)
    assert code == 0, err
    assert "1 ran, 0 failed" in err
    assert runs[0].result_path.stat().st_mtime_ns == first_result  # not redone
    status = runs[1].status()
    assert status["state"] == "done"
    assert status["resumed_from"] >= stopped_at  # from its checkpoint, not from scratch
    assert status["attempt"] == (2 if how == "kill-9-group" else 1)  # a death is an attempt
    assert [r["step"] for r in runs[1].metrics()] == [10, 20, 30, 40, 50, 60]
    assert runs[1].result()["steps"] == 60


def test_run_status_json_is_never_torn(tmp_path):
    """A reader polling status.json while the heartbeat thread and the run write it."""
    from debias_bench.runs.heartbeat import Heartbeat

    run_dir = plant(RunStore(tmp_path), "vanilla", "toy", 5.0, 0)
    run_dir.transition(RunState.RUNNING)
    with Heartbeat(run_dir, every_s=0.001):
        for step in range(300):
            run_dir.heartbeat(step=step)
            assert run_dir.status()["state"] == "running"
    finish_running(run_dir)
    time.sleep(0.01)
    assert json.loads(run_dir.status_path.read_text())["state"] == "done"  # not beaten back
