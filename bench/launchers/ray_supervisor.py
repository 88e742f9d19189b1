"""The supervisor of one run under ``--launcher ray``:
``python -m debias_bench.launchers.ray_supervisor``, started by the run's Ray task
(:mod:`.ray_task`) in a session of its own.

It runs the run in a worker process exactly as the local launcher does
(:class:`~.process.WorkerProcess`: ``--timeout``, the exit code and stderr tail recorded in
``status.json``) and prints the run's state as its last line. It lives in a session of its own,
out of reach of signals to the Ray worker's process group. When the Ray worker dies (killed,
or the node's memory monitor) the kernel sends this process SIGTERM (``PR_SET_PDEATHSIG``); it
then asks the run's worker to checkpoint and stop, kills it after ``--grace`` seconds if it
has not, records its exit (``interrupted``, or ``dead``) and exits. When Ray ends the task
itself (the sweep cancels it, or Ray cleans up after a driver that died), Ray also kills this
process (a Ray worker's children go with it); the run's worker then gets SIGTERM from the
kernel in turn, checkpoints and records ``interrupted`` itself, without an exit code. Either
way the run lets go of its lock, and a rerun resumes it.

Its input, JSON on stdin: ``{"job": WorkerJob fields, "timeout_s": ..., "grace_s": ...}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from debias_bench.plugins.loading import import_plugins

from .job import WorkerJob
from .process import WorkerProcess

#: how often the supervisor looks at its worker
POLL_S = 0.2


def supervise(request: dict[str, Any]) -> str:
    """Run the job of ``request`` in a worker process until it ends; returns the run's state
    as recorded. SIGTERM, SIGINT or SIGHUP to this process stop the run (checkpointed)."""
    job = WorkerJob(**request["job"])
    # recording the exit may plan the run again, which needs its method and dataset registered
    import_plugins(job.plugins, job.sys_path)
    stop: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stop.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    worker = WorkerProcess(
        job, dict(os.environ), request.get("timeout_s"), float(request.get("grace_s", 30.0))
    )
    while worker.poll() is None:
        if stop:
            worker.terminate()  # checkpoint at the next step; SIGKILL after the grace period
        time.sleep(POLL_S)
    return str(worker.finish())


def main() -> int:
    state = supervise(json.load(sys.stdin))
    print(state, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
