"""The Ray task of one run (:func:`run_task`): what a Ray worker executes for
``--launcher ray``.

It starts the run's supervisor (:mod:`.ray_supervisor`) in a session of its own, with the
run's share of the node (its CPU threads; the GPU Ray gave it, ``CUDA_VISIBLE_DEVICES``),
waits for it and returns the run's state as recorded. The supervisor, not this task, owns the
run's worker, so that whatever ends the Ray worker (the sweep cancelling its tasks, a kill, Ray
cleaning up after a driver that died) leaves the run checkpointed and recorded (see its
docstring). Where this task runs is recorded in the run's ``status.json`` (``ray_node``,
``ray_worker_pid``) for ``bench status`` and for the curious.

Ray pickles :func:`run_task` by reference: every node imports it from its own
``debias_bench``, so the package (and the plugins the runs need) must be installed there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from .job import die_with_parent
from .slots import THREAD_VARS

#: how much of the supervisor's stderr an error carries
ERR_TAIL_CHARS = 2000


def worker_env(threads: int, gpu_ids: list[Any], base: dict[str, str]) -> dict[str, str]:
    """The environment of the run's supervisor and worker: ``threads`` CPU threads, and the
    GPUs Ray assigned to the task (none at all for a CPU run)."""
    env = dict(base)
    env.update(dict.fromkeys(THREAD_VARS, str(threads)))
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(gpu) for gpu in gpu_ids)
    return env


def run_task(request_json: str, threads: int) -> str:
    """Run one run through its supervisor; returns its state (``done``, ``failed``, ...).
    A supervisor that could not record one (it failed to start) is a RuntimeError with its
    stderr tail, which the sweep records as the run's error."""
    import ray

    request = json.loads(request_json)
    context = ray.get_runtime_context()
    request["job"]["status_fields"].update(
        ray_node=context.get_node_id(), ray_worker_pid=os.getpid()
    )
    env = worker_env(threads, list(ray.get_gpu_ids()), dict(os.environ))
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "debias_bench.launchers.ray_supervisor"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            start_new_session=True,  # out of reach of what ends this worker's process group
            preexec_fn=die_with_parent,  # SIGTERM when this Ray worker dies
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.close()
        while proc.poll() is None:
            try:
                time.sleep(0.2)
            except KeyboardInterrupt:  # ray.cancel(force=False): stop the run, checkpointed
                proc.send_signal(signal.SIGTERM)
        lines = proc.stdout.read().decode(errors="replace").split()
        err.seek(0)
        tail = err.read().decode(errors="replace")[-ERR_TAIL_CHARS:]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"the run's supervisor exited with code {proc.returncode} on "
            f"{os.uname().nodename}: {tail.strip() or 'no output'}"
        )
    return lines[-1]
