"""``--launcher ray`` against a real local Ray instance (the one ``bench run`` starts when no
address is given), no mock: the issue's grid gives the inline launcher's results; a Ray
worker killed during a run leaves it ``interrupted``, the sweep's own process killed leaves
no lock held, and a rerun resumes the run to the result an uninterrupted run gives.

The Ray tests are skipped, with the reason, where Ray is not installed (``pip install -e
'.[ray]'``; the test environment of tox.ini installs it). The checks before Ray starts (Ray
missing, flags that do not fit together) run everywhere.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import bench_env, run_bench
from support.scripted import _wait_for, bench_args

from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(
    not HAS_RAY, reason="Ray is not installed here: pip install -e '.[ray]' (the ray extra)"
)
#: a small local Ray instance: two CPUs, one per run
RAY = ["--launcher", "ray", "--ray-local-cpus", "2"]
#: the issue's grid (issue 54, "Done when")
GRID = [
    *("--methods", "vanilla,etf_debias", "--datasets", "cmnist", "--ratios", "5"),
    *("--seeds", "0,1", "--preset", "ci", "--device", "cpu"),
]


def accuracies(out: Path) -> dict[str, dict[str, object]]:
    """run id -> what result.json says of accuracy: every selection's metrics, the steps."""
    found = {}
    for run_dir in RunStore(out).runs():
        result = run_dir.result()
        assert result is not None, f"{run_dir.path} has no result"
        found[run_dir.run_id] = {"selections": result["selections"], "steps": result["steps"]}
    return found


# ------------------------------------------------------------------ before Ray starts
def test_ray_missing_is_one_error_naming_the_extra(tmp_path, in_process, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as where it is absent
    code, _, err = in_process("run", *bench_args(tmp_path / "runs", "1"), "--launcher", "ray")
    assert code == 2, err
    assert "--launcher ray needs Ray" in err and "pip install -e '.[ray]'" in err
    assert "Traceback" not in err and not (tmp_path / "runs").exists()  # nothing recorded


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--gpus-per-run", "0.5"], "--device cpu with --gpus-per-run 0.5"),
        (["--cpus-per-run", "0"], "a run needs some CPU"),
        (["--ray-address", "127.0.0.1:1", "--ray-local-cpus", "2"], "--ray-local-cpus sizes"),
        (["--workers", "2"], "--workers is a flag of --launcher local"),
    ],
)
def test_flags_that_do_not_fit_are_refused_before_ray_starts(tmp_path, in_process, flags, says):
    code, _, err = in_process(
        "run", *bench_args(tmp_path / "runs", "1"), "--launcher", "ray", *flags
    )
    assert code == 2 and says in err and "Traceback" not in err, err


# ------------------------------------------------------------------ a real local Ray instance
@needs_ray
@pytest.mark.slow
@pytest.mark.realdata
def test_the_issue_grid_through_ray_equals_inline(tmp_path, raw_root, data_root):
    env = {**os.environ, "BENCH_RAW_ROOT": str(raw_root), "BENCH_DATA_ROOT": str(data_root)}
    env["OMP_NUM_THREADS"] = "1"  # inline: one thread; a Ray run: its one CPU
    inline, ray = tmp_path / "inline", tmp_path / "ray"
    done = run_bench("run", *GRID, "--out", str(inline), env=env)
    assert done.returncode == 0, done.stderr
    done = run_bench("run", *GRID, "--out", str(ray), *RAY, env=env)
    assert done.returncode == 0, done.stderr
    assert "4 ran, 0 failed" in done.stderr and "on 2 Ray slot(s)" in done.stderr
    assert accuracies(ray) == accuracies(inline) and len(accuracies(ray)) == 4
    for run_dir in RunStore(ray).runs():  # each ran as a Ray task, on one CPU thread
        status = run_dir.status()
        assert status["launcher"] == "ray" and status["exit_code"] == 0
        assert status["threads"] == 1 and status["resources"] == {"cpus": 1.0, "gpus": 0.0}
        assert status["ray_node"] and status["ray_worker_pid"] != status["pid"]


def _midway(out: Path, after_step: int = 0) -> RunDir | None:
    """The store's one run once its worker has trained past ``after_step``."""
    runs = list(RunStore(out).runs()) if out.exists() else []
    if not runs:
        return None
    try:
        status = runs[0].status()
    except Exception:  # being written
        return None
    running = status.get("state") == RunState.RUNNING and status.get("ray_worker_pid")
    return runs[0] if running and int(status.get("step") or 0) > after_step else None


def _kill_worker_and_wait(sweep: subprocess.Popen[str], run_dir: RunDir, timeout_s: int) -> str:
    """``kill -9`` the Ray worker of ``run_dir``'s run; the sweep's stderr once it has ended
    (a failure naming the run's status and that stderr if it has not within ``timeout_s``)."""
    os.kill(int(run_dir.status()["ray_worker_pid"]), signal.SIGKILL)
    try:
        return sweep.communicate(timeout=timeout_s)[1]
    except subprocess.TimeoutExpired:
        sweep.kill()
        err = sweep.communicate()[1]
        pytest.fail(
            f"the sweep did not end after its Ray worker was killed: {run_dir.status()}\n{err}"
        )


@needs_ray
@pytest.mark.slow
def test_killed_ray_worker_then_killed_sweep_then_resume(tmp_path, in_process):
    """A Ray worker ``kill -9``-ed during a run: the run is ``interrupted`` (its supervisor
    checkpointed it), the sweep exits 1. The sweep's own process ``kill -9``-ed during the
    rerun: Ray ends its task, the run checkpoints and lets go of its lock. A third run of the
    same command resumes it, as attempt 1, to the result of an uninterrupted run."""
    out, steps = tmp_path / "runs", 80
    args = [*bench_args(out, "6", steps=steps), *RAY]
    env = bench_env(tmp_path, SCRIPTED_DELAY_S="0.1")  # ratio 6: a slow run, 0.1 s a batch

    def sweep() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "debias_bench.cli", "run", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    # 1. the Ray worker of the run killed
    first = sweep()
    try:
        _wait_for(lambda: _midway(out) is not None, 240, "the run midway")
        run_dir = _midway(out)
        assert run_dir is not None
        err = _kill_worker_and_wait(first, run_dir, 180)
    finally:
        first.kill()
    assert first.returncode == 1, err
    assert "1 interrupted" in err
    status = run_dir.status()
    assert status["state"] == "interrupted" and status["exit_code"] == 128 + signal.SIGTERM
    stopped_at = status["step"]
    assert 0 < stopped_at < steps

    # 2. the sweep itself killed: its run stops and lets go of its lock
    second = sweep()
    try:
        _wait_for(lambda: _midway(out, stopped_at) is not None, 240, "the resumed run midway")
    finally:
        second.kill()
        second.communicate(timeout=60)
    _wait_for(lambda: run_dir.lock_held() is False, 120, "the run to let go of its lock")
    assert run_dir.effective_state() in (RunState.INTERRUPTED, RunState.DEAD)
    assert run_dir.status()["step"] > stopped_at

    # 3. a plain rerun resumes it to the uninterrupted result
    third = run_bench("run", *args, env=bench_env(tmp_path))
    assert third.returncode == 0, third.stderr
    status = run_dir.status()
    assert status["state"] == "done" and status["attempt"] == 1 and status["resumed_from"] > 0
    assert [r["step"] for r in run_dir.metrics()] == list(range(10, steps + 1, 10))
    plain = tmp_path / "plain"
    code, _, err = in_process("run", *bench_args(plain, "6", steps=steps))
    assert code == 0, err
    assert accuracies(out) == accuracies(plain)


@needs_ray
@pytest.mark.slow
def test_a_run_that_records_its_end_after_its_task_died_still_ends_the_sweep(tmp_path):
    """The run's Ray worker killed while the run hangs in a read (it ignores SIGTERM): Ray
    reports the task failed at once, the supervisor records the run only after ``--grace``
    (when it kills the worker). The sweep reads the store again until it has (it once stopped
    reading after its first look, and waited forever), and ends, naming the run."""
    out = tmp_path / "runs"
    args = [*bench_args(out, "3"), *RAY, "--grace", "3"]  # ratio 3: hangs at its 5th batch
    sweep = subprocess.Popen(
        [sys.executable, "-m", "debias_bench.cli", "run", *args],
        env=bench_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: _midway(out, 3) is not None, 240, "the run hanging in its read")
        run_dir = _midway(out, 3)
        assert run_dir is not None
        err = _kill_worker_and_wait(sweep, run_dir, 90)
    finally:
        sweep.kill()
    assert sweep.returncode == 1, err
    assert run_dir.lock_held() is False
    state = run_dir.effective_state()
    assert state in (RunState.INTERRUPTED, RunState.DEAD, RunState.FAILED), run_dir.status()
    assert f"1 {state.value}" in err, err
