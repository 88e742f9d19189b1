"""``--launcher slurm`` against a real SLURM (single node: ``scripts/slurm_local_cluster.sh``).

Skipped, with the reason shown, where no SLURM controller answers. In CI, ``.ci/run`` starts
the local cluster first and sets ``BENCH_REQUIRE_SLURM=1``, which turns that skip into a
failure: there these tests must run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import time

import pytest
from support.scripted import bench_args, statuses

from debias_bench.launchers.slurm_queue import slurm_available
from debias_bench.runs.store import RunStore
from debias_bench.session.status import collect

WHY_NOT = slurm_available()
if WHY_NOT and os.environ.get("BENCH_REQUIRE_SLURM") == "1":
    raise RuntimeError(f"BENCH_REQUIRE_SLURM=1 but SLURM is not running: {WHY_NOT}")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        WHY_NOT is not None,
        reason=f"SLURM is not running here ({WHY_NOT}); start it: scripts/slurm_local_cluster.sh",
    ),
]
SLURM = ["--launcher", "slurm", "--cpus-per-run", "1", "--mem-per-run", "1G", "--time", "10"]
#: the trackers' libraries (the test extra installs them): the tiny grid is tracked from its jobs
TRACKING = all(importlib.util.find_spec(name) for name in ("mlflow", "tensorboard"))


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            queue = subprocess.run(["squeue"], capture_output=True, text=True).stdout
            raise AssertionError(f"timed out waiting for {what}; squeue:\n{queue}")
        time.sleep(0.5)


def test_tiny_grid_through_slurm(tmp_path, in_process):
    out, db, logdir = tmp_path / "runs", tmp_path / "mlflow.db", tmp_path / "tb"
    track = ["--track", f"mlflow=sqlite:///{db}", "--track", f"tensorboard={logdir}"]
    code, table, err = in_process(
        "run", *bench_args(out, "1,2"), *SLURM, "--array-parallelism", "2",
        *(track if TRACKING else []),
    )  # fmt: skip
    assert code == 1, err  # one run fails on purpose
    assert "2 ran, 1 failed" in err and "[sweep]" in err
    assert "| done" in table and "| failed" in table
    st = statuses(out)
    assert st[1.0]["state"] == "done" and st[1.0]["exit_code"] == 0
    assert re.fullmatch(r"\d+_[01]", st[1.0]["slurm_job_id"])  # an array task
    assert st[1.0]["resources"]["mem"] == "1G" and st[1.0]["threads"] == 1
    assert st[2.0]["state"] == "failed" and st[2.0]["exit_code"] == 1
    assert "RuntimeError: scripted failure" in st[2.0]["stderr_tail"]
    done = next(d for d in RunStore(out).runs() if d.is_done())
    assert done.result()["steps"] == 40 and [r["step"] for r in done.metrics()] == [10, 20, 30, 40]

    code, report, _ = in_process("status", "--out", str(out))
    assert code == 0 and "1 done" in report and "1 failed" in report
    assert st[1.0]["slurm_job_id"] in report and st[2.0]["slurm_job_id"] in report
    code, failures, _ = in_process("status", "--out", str(out), "--failed")
    assert f"SLURM job {st[2.0]['slurm_job_id']}" in failures
    assert "exit code 1" in failures and "RuntimeError: scripted failure" in failures

    if TRACKING:  # each Slurm job sent its run to both trackers (issue 27: every launcher)
        from support.tracked import mlflow_runs, same_curve, store_losses, tb_scalars

        tracked = mlflow_runs(db, out)
        assert set(tracked) == {d.run_id for d in RunStore(out).runs()}
        assert tracked[done.run_id].info.status == "FINISHED"
        assert "lr" in tracked[done.run_id].data.params
        assert tracked[done.run_id].data.tags["run_id"] == done.run_id
        failed_id = next(i for i in tracked if i != done.run_id)
        assert tracked[failed_id].info.status == "FAILED"
        assert same_curve(tb_scalars(logdir / done.run_id, "train/loss"), store_losses(done))


def test_requeued_job_resumes_from_its_checkpoint(tmp_path, in_process, monkeypatch):
    """A job put back in the queue while it runs (what a preemption does) checkpoints, is
    'queued' for `bench status`, and resumes where it stopped, without duplicate records."""
    monkeypatch.setenv("SCRIPTED_DELAY_S", "0.1")
    out = tmp_path / "runs"
    code, _, err = in_process("run", *bench_args(out, "6", steps=100), *SLURM, "--no-wait")
    assert code == 0 and "keep running" in err, err
    store = RunStore(out)
    _wait_for(lambda: any(len(d.metrics()) >= 2 for d in store.runs()), 300, "the run midway")
    (run_dir,) = store.runs()
    job_id = run_dir.status()["slurm_job_id"]
    assert [r["state"] for r in collect(store)] == ["running"]

    subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=60)
    _wait_for(lambda: run_dir.status()["state"] == "interrupted", 120, "the run to checkpoint")
    stopped_at = run_dir.status()["step"]
    _wait_for(lambda: collect(store)[0]["state"] == "queued", 60, "the job back in the queue")
    # SLURM holds a requeued job back for a while (BeginTime); let it start now.
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], timeout=60)
    _wait_for(run_dir.is_done, 300, "the resumed run to finish")

    status = run_dir.status()
    assert status["state"] == "done" and status["slurm_job_id"] == job_id
    assert status["resumed_from"] >= stopped_at > 0
    assert status["attempt"] == 1  # a requeue is not a failed attempt
    assert [r["step"] for r in run_dir.metrics()] == list(range(10, 101, 10))
