"""Launchers agree on faults: Ctrl-C of an inline run checkpoints at the current step with no
traceback; ``kill -9`` leaves a run ``dead`` (a plain rerun resumes it) under every launcher;
a SIGTERM to one local worker interrupts that run and the sweep says so (exit 1); a sweep
that finds a run held by another live ``bench run`` waits for it, or says so with ``--no-wait``.

The runs are the scripted ones of ``support.scripted`` (ratio 6: a slow, healthy run).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.processes import bench_env, run_of_seed
from support.scripted import _wait_for, bench_args

from debias_bench.plugins.loading import import_plugins

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


def _training(out: Path, seed: int = 0, step: int = 1) -> bool:
    """The run is training (its heartbeat reported ``step``), on any launcher."""
    try:
        status = run_of_seed(out, seed).status()
    except (AssertionError, OSError, ValueError):
        return False
    return status.get("state") == "running" and int(status.get("step") or 0) >= step


STOPS = {"ctrl-c": signal.SIGINT, "sighup": signal.SIGHUP, "kill-9": signal.SIGKILL}


@pytest.mark.parametrize("how", list(STOPS))
def test_an_inline_run_stopped_or_killed_resumes_on_a_plain_rerun(tmp_path, in_process, how):
    """Ctrl-C and SIGHUP (a closed terminal) stop an inline sweep as SIGTERM does: the run
    checkpoints at its step, the summary is printed, exit code 128 + N, and the rerun resumes
    it as the same attempt; ``kill -9`` leaves it dead, and resuming it is a new attempt."""
    out = tmp_path / "runs"
    args = bench_args(out, "6", steps=60)
    args[args.index("eval_every=10")] = "eval_every=50"
    sweep = _start(tmp_path, args)
    try:
        _wait_for(lambda: _training(out), 300, "the run training")
        time.sleep(1.0)
    finally:
        sweep.send_signal(STOPS[how])
    summary, err = sweep.communicate(timeout=120)
    run_dir = run_of_seed(out)
    if how != "kill-9":
        assert "Traceback" not in err, err
        assert sweep.returncode == 128 + STOPS[how], err
        assert "| interrupted" in summary and "1 ran, 0 failed, 1 interrupted" in err, err
        assert "interrupted: rerun the same command to resume" in err
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
    assert status["attempt"] == (2 if how == "kill-9" else 1)  # a death is an attempt
    assert [r["step"] for r in run_dir.metrics()] == [50, 60]


def test_a_sigterm_to_one_local_worker_interrupts_only_that_run(tmp_path, in_process):
    out = tmp_path / "runs"
    args = [*bench_args(out, "6", seeds="0,1", steps=60), "--launcher", "local", "--workers", "2"]
    sweep = _start(tmp_path, args)
    try:
        _wait_for(lambda: _training(out, 0) and _training(out, 1), 300, "both runs training")
        victim = run_of_seed(out, 0)
        subprocess.run(["kill", "-TERM", str(victim.status()["pid"])], check=True)
        _, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 1, err  # a run of the grid is not done
    assert victim.status()["state"] == "interrupted"
    assert run_of_seed(out, 1).status()["state"] == "done"  # the other one went on
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
    assert run_of_seed(out).status()["attempt"] == 1  # trained once


# ------------------------------------------------------------------ faults of issue 36
@pytest.fixture
def faulty(registries_restored) -> None:
    """The ``faulty`` plugin method registered here too (to read its runs' folders)."""
    import_plugins(["support.faulty_methods"])


def _start_logged(tmp_path: Path, args: list[str], **env: str) -> tuple[subprocess.Popen, Path]:
    """``bench run`` with its stderr in a file that the test can read while it runs."""
    log = tmp_path / "stderr.log"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "debias_bench.cli", "run", *args],
        env=bench_env(tmp_path, BENCH_PLUGINS="support.scripted,support.faulty_methods", **env),
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    return sweep, log


def _finish(sweep: subprocess.Popen, log: Path, timeout_s: float) -> tuple[str, str]:
    """The sweep's stdout and stderr once it exits (killed if it outlives ``timeout_s``)."""
    try:
        out, _ = sweep.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        sweep.kill()
        sweep.communicate()
        raise AssertionError(
            f"bench run still running after {timeout_s} s:\n{log.read_text()}"
        ) from None
    return out, log.read_text()


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_os_exit_in_method_code_fails_the_run_and_the_sweep_says_so(tmp_path, faulty, launcher):
    """``os._exit(0)`` ends a process with no exception and exit code 0: under the inline
    launcher it must not end the sweep with success and no summary. Run in a subprocess
    (in this process it would end pytest itself with exit code 0)."""
    out = tmp_path / "runs"
    args = [*bench_args(out, "1", steps=20), "--methods", "faulty", "--set", "fault=os_exit"]
    sweep, log = _start_logged(tmp_path, [*args, "--launcher", launcher])
    summary, err = _finish(sweep, log, 300)
    assert sweep.returncode == 1, err
    assert "| failed" in summary and "os._exit(0)" in summary, summary
    assert "1 ran, 1 failed" in err and "not every run is done (1 failed)" in err, err
    status = run_of_seed(out).status()
    assert status["state"] == "failed" and status["reason"] == "crashed", status
    assert status["error"] == "the run's code called os._exit(0) during the run"


@pytest.mark.parametrize("how", ["second-sigterm", "grace"])
def test_an_inline_run_stuck_in_its_update_is_stopped(tmp_path, faulty, how):
    """A method that sleeps for ever in ``update`` never reaches the step at which a stopped
    run checkpoints: a second SIGTERM, or ``--grace`` seconds after the first, stops its code
    at once; the run is interrupted (from its last checkpoint, step 4), the summary printed,
    exit code 143."""
    out = tmp_path / "runs"
    args = [
        *bench_args(out, "1", steps=20),
        *("--methods", "faulty", "--set", "fault=sleep", "--set", "eval_every=2"),
        *("--grace", "1" if how == "grace" else "600"),
    ]
    sweep, log = _start_logged(tmp_path, args)
    try:
        _wait_for(lambda: "sleeping for ever" in log.read_text(), 300, "the method sleeping")
        sweep.send_signal(signal.SIGTERM)
        if how == "second-sigterm":
            _wait_for(lambda: "SIGTERM: checkpointing" in log.read_text(), 30, "the first stop")
            time.sleep(0.5)
            assert sweep.poll() is None  # the first one only asks
            sweep.send_signal(signal.SIGTERM)
        stopping = time.monotonic()
        summary, err = _finish(sweep, log, 60)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    took = time.monotonic() - stopping
    assert sweep.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and "| interrupted" in summary, err
    assert "1 ran, 0 failed, 1 interrupted" in err and "rerun the same command" in err
    run_dir = run_of_seed(out)
    status = run_dir.status()
    assert status["state"] == "interrupted" and status["attempt"] == 1, status
    why = "by a second SIGTERM" if how == "second-sigterm" else "within --grace 1 s"
    assert why in status["note"] and "resumes from its last checkpoint" in status["note"]
    assert run_dir.load_checkpoint()["step"] == 4  # its last evaluation; resumable
    print(f"{how}: bench run exited {took:.1f} s after the stop")


def _children(pid: int) -> dict[int, str]:
    """pid -> command line of the child processes of ``pid`` (Linux /proc)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                found[int(stat.parent.name)] = cmdline.decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_a_killed_warm_worker_server_interrupts_its_run_and_says_so(tmp_path, in_process):
    """The warm worker server killed mid-run: its worker checkpoints (SIGTERM through
    PR_SET_PDEATHSIG) and the run is interrupted with the reason named (not an exit code 255
    from nowhere), the next run starts from a new server, exit code 1; a rerun resumes it as
    the same attempt."""
    out = tmp_path / "runs"
    args = [
        *bench_args(out, "6", seeds="0,1", steps=30),
        *("--launcher", "local", "--workers", "1"),
    ]
    sweep, log = _start_logged(tmp_path, args, SCRIPTED_DELAY_S=SLOW, BENCH_WORKER_START="warm")
    try:
        _wait_for(lambda: _training(out, 0, step=3), 300, "the first run training")
        (server,) = [p for p, cmd in _children(sweep.pid).items() if "forkserver" in cmd]
        os.kill(server, signal.SIGKILL)
        summary, err = _finish(sweep, log, 300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 1, err
    assert "the warm worker server died (SIGKILL)" in err
    assert "2 ran, 0 failed, 1 interrupted" in err, err
    assert "not every run is done (1 interrupted): exit code 1" in err
    victim = run_of_seed(out, 0).status()
    assert victim["state"] == "interrupted" and victim["exit_code"] is None, victim
    assert victim["note"].startswith("the worker server died (SIGKILL) during the run; ")
    assert "the worker server died (SIGKILL)" in summary
    assert run_of_seed(out, 1).status()["state"] == "done"  # from a new server
    code, _, err = in_process("run", *args[: args.index("--launcher")])  # resumed inline
    assert code == 0, err
    status = run_of_seed(out, 0).status()
    assert status["state"] == "done" and status["attempt"] == 1 and status["resumed_from"] > 0


def test_a_closed_terminal_stops_a_local_sweep_and_its_workers_like_sigterm(tmp_path, in_process):
    """SIGHUP to the sweep's whole process group (what a closed terminal or ssh session
    sends: the sweep and its workers alike): the worker checkpoints instead of dying, the
    run is interrupted (not dead: no attempt counted), the summary is printed, exit 129."""
    out = tmp_path / "runs"
    args = [*bench_args(out, "6", steps=60), "--launcher", "local", "--workers", "1"]
    log = tmp_path / "stderr.log"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "debias_bench.cli", "run", *args],
        env=bench_env(tmp_path, SCRIPTED_DELAY_S=SLOW),
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        start_new_session=True,  # its own process group, as under a terminal
    )
    try:
        _wait_for(lambda: _training(out, step=2), 300, "the run training")
        os.killpg(sweep.pid, signal.SIGHUP)
        summary, err = _finish(sweep, log, 120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 128 + signal.SIGHUP, err
    assert "SIGHUP: stopping" in err and "| interrupted" in summary, err
    status = run_of_seed(out).status()
    assert status["state"] == "interrupted" and status["attempt"] == 1, status
    code, _, err = in_process("run", *args[: args.index("--launcher")])  # resumed inline
    assert code == 0, err
    assert run_of_seed(out).status()["attempt"] == 1


def test_a_stopped_sweep_counts_its_interrupted_run_and_folds_the_pending_ones(tmp_path):
    """SIGTERM to an inline sweep of three runs: the final table has the interrupted run,
    whose note is not cut inside a clause, and one line for the two runs not started; the
    count line names the interruption."""
    out = tmp_path / "runs"
    sweep, log = _start_logged(
        tmp_path, bench_args(out, "6", seeds="0,1,2", steps=60), SCRIPTED_DELAY_S=SLOW
    )
    try:
        _wait_for(lambda: _training(out), 300, "the first run training")
        sweep.send_signal(signal.SIGTERM)
        summary, err = _finish(sweep, log, 120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 128 + signal.SIGTERM, err
    rows = [line for line in summary.splitlines() if line.startswith("| vanilla")]
    assert len(rows) == 1 and "| interrupted" in rows[0], summary
    step = run_of_seed(out).status()["step"]
    assert rows[0].split("|")[-2].strip() == f"stopped at step {step}; rerun to resume"
    assert "2 runs not started (pending): rerun the same command to start them" in summary
    assert "1 ran, 0 failed, 1 interrupted" in err, err
