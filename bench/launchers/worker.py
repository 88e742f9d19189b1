"""One run in its own process: the worker (``python -m debias_bench.launchers.worker``).

The worker reads a :class:`~.job.WorkerJob` as JSON on stdin (a cold worker, :func:`main`) or
is forked from the warm server with it (:func:`forked_main`, see :mod:`.forkserver`), imports
the plugin modules that registered the run's method and dataset, and calls
:func:`~debias_bench.launchers.run_one.run_one`, which takes the run's lock and records its state.
SIGTERM, SIGINT, SIGHUP (a closed terminal), SIGUSR1 and SIGUSR2 (and the death of its parent)
make it checkpoint at the next step and exit with ``128 + signal``; the run is then
``interrupted`` and resumes from its checkpoint when started again. The parent's side is
:mod:`.process`.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from debias_bench.config.run_config import RunConfig
from debias_bench.errors import Interrupted
from debias_bench.launchers.run_one import run_one, worker_identity
from debias_bench.paths import DataPlace
from debias_bench.plugins.loading import import_plugins
from debias_bench.runs.nofollow import open_own
from debias_bench.runs.progress import LogLines
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.tracking import TrackSpec

from .job import EXIT_BUSY, EXIT_FAILED, EXIT_NOT_RUN, WorkerJob, die_with_parent


def _watch_parent(stop: dict[str, int | None]) -> None:
    """Ask the run to stop when the parent dies (where PR_SET_PDEATHSIG is not available)."""
    parent = os.getppid()
    while stop["signal"] is None:
        if os.getppid() != parent:
            stop["signal"] = signal.SIGHUP
            return
        time.sleep(1.0)


def main() -> int:
    """The cold worker: a fresh interpreter that reads its job on stdin."""
    return run_job(WorkerJob(**json.load(sys.stdin)))


def _watch_lifeline(lifeline: Connection, stop: dict[str, int | None]) -> None:
    """Ask the run to stop when the launcher dies: its end of ``lifeline`` closes."""
    with contextlib.suppress(EOFError, OSError):
        lifeline.recv()
    stop["signal"] = signal.SIGHUP


def forked_main(
    job_json: str, env: dict[str, str], stdout: str, stderr: str, lifeline: Connection
) -> None:
    """The warm worker: a child of the fork server (:mod:`.forkserver`). It takes the
    environment a cold worker would have been given and sends its output to the run's logs,
    before anything reads them (CUDA, thread counts). Its parent is the fork server, which
    outlives a killed launcher while runs live: ``lifeline`` tells it the launcher died."""
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, stdout), (2, stderr)):
        target = open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # no link
        os.dup2(target, fd)
        os.close(target)
    die_with_parent()  # its parent is the fork server, which exits with the sweep
    try:
        code = run_job(WorkerJob(**json.loads(job_json)), lifeline)
    finally:
        end_children()
    sys.exit(code)


def end_children(grace_s: float = 5.0) -> int:
    """Stop the child processes a run left behind; returns how many. A forked worker's exit
    waits for its non-daemon children (``multiprocessing`` joins them, and no ``atexit`` hook
    runs to shut a pool down), so a plugin's idle process pool (joblib's lives 300 s) would
    hold the run's launcher slot after the run has ended and recorded its result."""
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace_s
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
    return len(children)


def run_job(job: WorkerJob, lifeline: Connection | None = None) -> int:
    """Run ``job`` in this process; returns the worker's exit code."""

    import_plugins(job.plugins, job.sys_path)
    import torch

    threads = int(os.environ.get("BENCH_THREADS") or 0)
    if threads:
        torch.set_num_threads(threads)
    stop = _stop_requests(lifeline)

    config = RunConfig.from_json(job.config)
    print(f"worker {os.getpid()} on {socket.gethostname()}: {config.run_id}", file=sys.stderr)
    if job.planned_id and config.run_id != job.planned_id:
        print(
            f"RunIdError: this worker's code gives the run id {config.run_id}, the sweep planned "
            f"{job.planned_id}: the code or a method's defaults changed while the sweep ran; "
            "this run did not start: rerun the sweep with --retry-failed",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        outcome = run_one(
            config,
            RunStore(Path(job.out)),
            DataPlace(Path(job.raw_root), Path(job.data_root)),
            torch.device(job.device),
            LogLines(f"{config.run_id}: "),
            retry_failed=job.retry_failed,
            should_stop=lambda step: stop["signal"] is not None,
            max_attempts=job.max_attempts,
            status_fields={**job.status_fields, **worker_identity()},
            track=[TrackSpec.parse(key) for key in job.track],
        )
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 128 + int(stop["signal"] or signal.SIGTERM)
    if outcome.state is RunState.FAILED and outcome.ran:  # the traceback, for the stderr tail
        print(outcome.run_dir.status().get("traceback_tail", ""), file=sys.stderr, end="")
    print(f"{config.run_id}: {outcome.state} {outcome.note}".rstrip(), file=sys.stderr)
    return _exit_code(outcome.state, outcome.ran)


def _stop_requests(lifeline: Connection | None) -> dict[str, int | None]:
    """A cell whose ``"signal"`` becomes set when the run should checkpoint and stop: on a
    signal (SIGUSR2: SLURM's warning before the time limit, submitit's --signal), when the
    parent process dies, or when ``lifeline`` closes."""
    stop: dict[str, int | None] = {"signal": None}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["signal"] = signum

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, on_signal)
    threading.Thread(target=_watch_parent, args=(stop,), daemon=True).start()
    if lifeline is not None:
        threading.Thread(target=_watch_lifeline, args=(lifeline, stop), daemon=True).start()
    return stop


def _exit_code(state: RunState, ran: bool) -> int:
    """The worker's exit code for a run that ended in ``state`` (``ran``: it trained here)."""
    if state is RunState.RUNNING:
        return EXIT_BUSY
    if state is RunState.FAILED:
        return EXIT_FAILED if ran else EXIT_NOT_RUN
    return 0


if __name__ == "__main__":
    sys.exit(main())
