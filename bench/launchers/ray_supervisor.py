"""The supervisor of one run under ``--launcher ray``:
``python -m debias_bench.launchers.ray_supervisor``, started by the run's Ray task
(:mod:`.ray_task`) in a session of its own.

It runs the run in a worker process exactly as the local launcher does
(:class:`~.process.WorkerProcess`: ``--timeout``, the exit code and stderr tail recorded in
``status.json``) and prints the run's state as its last line. Being a process of its own, out
of the Ray worker's process group, is what makes Ray's ways of ending a task safe for the run:
when the Ray worker dies (the task cancelled, the worker killed, the driver gone and Ray
cleaning up its job) the kernel sends this process SIGTERM (``PR_SET_PDEATHSIG``); it then asks
the worker to checkpoint and stop, kills it after ``--grace`` seconds if it has not, records
its exit (``interrupted``, or ``dead``) and exits. No run is left holding its lock.

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
