"""Launchers agree on faults: Ctrl-C of an inline run checkpoints at the current step with no
traceback; ``kill -9`` leaves a run ``dead`` (a plain rerun resumes it) under every launcher;
a SIGTERM to one local worker interrupts that run and the sweep says so (exit 1); a sweep
that finds a run held by another live ``bench run`` waits for it, or says so with ``--no-wait``.

The runs are the scripted ones of ``test_launch_local`` (ratio 6: a slow, healthy run).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import bench_env
from test_launch_local import _wait_for, bench_args

from debias_bench.store import RunDir, RunStore

pytestmark = pytest.mark.slow
SLOW = "0.1"  # seconds per training batch of the slow scripted run


def _start(tmp_path: Path, args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "debias_bench.cli", "run", *args],
        env=bench_env(tmp_path, SCRIPTED_DELAY_S=SLOW),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_dir(out: Path, seed: int = 0) -> RunDir:
    found = [d for d in RunStore(out).runs() if d.config()["seed"] == seed]
    assert found, f"no run of seed {seed} under {out}"
    return found[0]


def _training(out: Path, seed: int = 0, step: int = 1) -> bool:
    """The run is training (its heartbeat reported ``step``), on any launcher."""
    try:
        status = _run_dir(out, seed).status()
    except (AssertionError, OSError, ValueError):
        return False
    return status.get("state") == "running" and int(status.get("step") or 0) >= step


@pytest.mark.parametrize("how", ["ctrl-c", "kill-9"])
def test_an_inline_run_stopped_or_killed_resumes_on_a_plain_rerun(tmp_path, in_process, how):
    out = tmp_path / "runs"
    args = bench_args(out, "6", steps=60)
    args[args.index("eval_every=10")] = "eval_every=50"
    sweep = _start(tmp_path, args)
    try:
        _wait_for(lambda: _training(out), 300, "the run training")
        time.sleep(1.0)
    finally:
        sweep.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
    _, err = sweep.communicate(timeout=120)
    run_dir = _run_dir(out)
    if how == "ctrl-c":
        assert "Traceback" not in err, err
        assert sweep.returncode != 0
        status = run_dir.status()
        assert status["state"] == "interrupted", status
        stopped_at = run_dir.load_checkpoint()["step"]
        assert 0 < stopped_at < 50  # at the current step, not at the last evaluation
        assert f"stopped at step {stopped_at}" in status["note"]
        assert status["step"] == stopped_at
    else:
        assert sweep.returncode == -signal.SIGKILL
        assert run_dir.effective_state() == "dead"
        stopped_at = (run_dir.load_checkpoint() or {"step": 0})["step"]

    code, _, err = in_process("run", *args)  # a plain rerun: no --retry-failed
    assert code == 0, err
    status = run_dir.status()
    assert status["state"] == "done" and status["resumed_from"] == stopped_at
    assert status["attempt"] == (1 if how == "ctrl-c" else 2)  # a death is an attempt
    assert [r["step"] for r in run_dir.metrics()] == [50, 60]


def test_a_sigterm_to_one_local_worker_interrupts_only_that_run(tmp_path, in_process):
    out = tmp_path / "runs"
    args = [*bench_args(out, "6", seeds="0,1", steps=60), "--launcher", "local", "--workers", "2"]
    sweep = _start(tmp_path, args)
    try:
        _wait_for(lambda: _training(out, 0) and _training(out, 1), 300, "both runs training")
        victim = _run_dir(out, 0)
        subprocess.run(["kill", "-TERM", str(victim.status()["pid"])], check=True)
        _, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 1, err  # a run of the grid is not done
    assert victim.status()["state"] == "interrupted"
    assert _run_dir(out, 1).status()["state"] == "done"  # the other one went on
    code, _, err = in_process("run", *args)
    assert code == 0 and "1 ran, 0 failed" in err, err
    assert victim.status()["resumed_from"] > 0


def test_a_sweep_waits_for_a_run_another_sweep_holds_or_says_so(tmp_path, in_process):
    out = tmp_path / "runs"
    args = bench_args(out, "6", steps=60)
    first = _start(tmp_path, args)
    try:
        _wait_for(lambda: _training(out), 300, "the first sweep's run training")
        code, _, err = in_process("run", *args, "--no-wait")
        assert code == 1, err
        assert "held by pid" in err and "not waited for (--no-wait)" in err
        assert first.poll() is None  # it went on
        code, _, err = in_process("run", *args)  # waits for the first sweep's run
        assert "waiting for it" in err and "released (done)" in err, err
        assert code == 0 and "0 ran, 0 failed" in err, err
    finally:
        if first.poll() is None:
            first.wait(timeout=300)
    assert first.returncode == 0
    assert _run_dir(out).status()["attempt"] == 1  # trained once
