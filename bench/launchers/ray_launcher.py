"""``--launcher ray``: one Ray task per run, on a Ray cluster (Kubernetes with KubeRay, cloud
machines) or on a local Ray instance (``pip install -e '.[ray]'``).

Each run asks Ray for ``--cpus-per-run`` CPUs and ``--gpus-per-run`` GPUs (fractions
pack several small runs on one GPU); Ray queues the tasks and starts each where its resources
are free. A task runs a supervisor process that runs the run in a worker process, as the local
launcher does (:mod:`.ray_task`, :mod:`.ray_supervisor`): same run ids, locks, checkpoints,
``status.json`` records and exit codes. The run store must be one folder that the ``bench``
process and every Ray node see at the same path (a shared volume: docs/kubernetes.md).

Stopping (``--fail-fast``, Ctrl-C, SIGTERM): the sweep cancels its tasks; the queued ones never
start and stay ``pending``, the running ones checkpoint at their next step and are
``interrupted``, and a rerun resumes them. A Ray worker killed during a run leaves it
``interrupted`` (or ``dead``, if the run's own worker died with it), and a rerun resumes it;
when the ``bench`` process itself dies, Ray ends its tasks and the runs stop the same way, so
none keeps its lock (:mod:`.ray_supervisor` says how).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from debias_bench.config.hparams import MAX_THREADS
from debias_bench.runs.states import RunState

from . import ray_outcome
from .factories import Launchable, LaunchContext, register_launcher
from .options import LauncherOption, LauncherOptions
from .ray_cluster import Connection, RunResources, connect, run_resources
from .ray_task import run_task
from .scheduler import Ended, Launcher, Task

#: how long after its task ended a run may take to record its end (its worker checkpointing)
#: on top of ``--grace``, before the sweep leaves it to the store's own rules
SETTLE_EXTRA_S = 30.0
#: how often the sweep reads the store for its queued and settling runs
READ_EVERY_S = 1.0
#: how much of Ray's error a run's record carries
ERROR_CHARS = 1500


@dataclass
class _Submitted:
    task: Task
    ref: Any  # the task's ObjectRef
    token: str  # this submission, as the run records it (``ray_submission``)
    started: bool = False  # the run's status says this task took it
    error: str | None = None  # the task raised: why (the run is settling)
    settle_by: float = 0.0


def describe(ray: Any, exc: BaseException) -> str:
    """One line (or a few) on why a Ray task raised ``exc``, for the run's record."""
    errors = ray.exceptions
    if isinstance(exc, errors.TaskCancelledError):
        return "cancelled by the sweep"
    if isinstance(exc, errors.WorkerCrashedError):
        return "its Ray worker died"
    if isinstance(exc, errors.RayTaskError) and exc.cause is not None:
        exc = exc.cause
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:ERROR_CHARS]


@register_launcher(
    "ray",
    display_name="Ray tasks on a Ray cluster or a local Ray instance (the ray extra)",
    where="on {parallelism} Ray slot(s)",
    kill_on_second_signal=False,  # a stopped run is killed after --grace by its supervisor
)
class RayLauncher(Launchable):
    poll_interval_s = 0.5

    options = (
        LauncherOption(
            "ray_address",
            "str",
            "ray: the cluster: host:port, auto (the one `ray start` began here) or "
            "ray://host:10001 (default: $RAY_ADDRESS, else a local Ray instance)",
            metavar="ADDRESS",
        ),
        LauncherOption(
            "cpus_per_run", "float", "ray: CPUs per run (default 1)", low=0, high=MAX_THREADS
        ),
        LauncherOption(
            "gpus_per_run",
            "float",
            "ray: GPUs per run; 0.25 puts four runs on one GPU (default: 1 with --device cuda, "
            "or --device auto on a cluster with GPUs; else 0)",
            low=0,
            high=64,
        ),
        LauncherOption(
            "ray_local_cpus",
            "int",
            "ray: CPUs of the local Ray instance (default: the cores this process may use)",
            low=1,
            high=MAX_THREADS,
        ),
    )

    @classmethod
    def from_options(cls, options: LauncherOptions, ctx: LaunchContext) -> Launcher:
        cpus, gpus = options.cpus_per_run, options.gpus_per_run
        run_resources(ctx.device, cpus, gpus)  # a bad combination fails before Ray starts
        connection = connect(options.ray_address, options.ray_local_cpus)
        try:
            cluster_gpus = float(connection.ray.cluster_resources().get("GPU", 0.0))
            resources = run_resources(ctx.device, cpus, gpus, cluster_gpus)
            connection.check_fits(resources)
        except BaseException:
            connection.close()
            raise
        return cls(ctx, connection, resources)

    def __init__(self, ctx: LaunchContext, connection: Connection, resources: RunResources):
        self.ctx, self.store, self.connection = ctx, ctx.store, connection
        self.ray, self.resources = connection.ray, resources
        self.remote = self.ray.remote(run_task)
        self.task_options = {
            "num_cpus": resources.cpus,
            "num_gpus": resources.gpus,
            "max_retries": 0,  # the sweep decides what runs again (--retry-failed, a rerun)
            "retry_exceptions": False,
        }
        self.submitted: dict[str, _Submitted] = {}
        # two clocks: the sweep asks active() before every poll(), so one shared clock would
        # let active() keep the settling runs from ever being read again
        self.read_at = 0.0  # active(): the queued runs' statuses
        self.settled_at = 0.0  # poll(): the settling runs' records

    def free(self) -> int:
        return 1 << 30  # Ray queues the tasks and starts each where its resources are free

    def parallelism(self) -> int:
        return self.connection.capacity(self.resources)

    def start(self, tasks: list[Task]) -> None:
        for task in tasks:
            token = uuid.uuid4().hex[:16]
            job = self.ctx.worker_job(
                task,
                self.resources.device,
                launcher=self.name,
                resources=self.resources.as_fields(),
                ray_submission=token,
            )
            request = {"job": asdict(job), "timeout_s": self.ctx.timeout_s}
            request["grace_s"] = self.ctx.grace_s
            ref = self.remote.options(name=f"bench {task.label}", **self.task_options).remote(
                json.dumps(request, default=str), self.resources.threads
            )
            self.submitted[task.run_id] = _Submitted(task, ref, token)

    def poll(self) -> list[Ended]:
        waiting = [s.ref for s in self.submitted.values() if s.error is None]
        ready = set()
        if waiting:
            done, _ = self.ray.wait(waiting, num_returns=len(waiting), timeout=0)
            ready = {ref.hex() for ref in done}
        ended = []
        for run_id, sub in list(self.submitted.items()):
            if sub.error is None and sub.ref.hex() in ready:
                try:
                    state = self.ray.get(sub.ref)
                except Exception as exc:
                    sub.error = describe(self.ray, exc)
                    sub.settle_by = time.monotonic() + self.ctx.grace_s + SETTLE_EXTRA_S
                    self.settled_at = 0.0  # look at the store now
                else:
                    ended.append(ray_outcome.returned(sub.task, self.store.run(run_id), state))
                    del self.submitted[run_id]
        if time.monotonic() - self.settled_at >= READ_EVERY_S:
            self.settled_at = time.monotonic()
            ended += self._settle()
        return ended

    def _settle(self) -> list[Ended]:
        """The runs whose task raised, once the store says how they ended."""
        ended = []
        for run_id, sub in list(self.submitted.items()):
            if sub.error is None:
                continue
            over = time.monotonic() > sub.settle_by
            run_dir = self.store.run(run_id)
            outcome = ray_outcome.after_error(sub.task, run_dir, sub.token, sub.error, over)
            if outcome is not None:
                ended.append(outcome)
                del self.submitted[run_id]
        return ended

    def active(self) -> dict[str, str]:
        """``running`` for the runs whose status says this sweep's task took them (read at
        most every :data:`READ_EVERY_S`), ``queued`` for those Ray has yet to start."""
        if time.monotonic() - self.read_at >= READ_EVERY_S:
            self.read_at = time.monotonic()
            for run_id, sub in self.submitted.items():
                if not sub.started:
                    try:
                        status = self.store.run(run_id).status()
                    except Exception:  # torn or foreign: not known to have started
                        continue
                    sub.started = status.get("ray_submission") == sub.token
        return {
            run_id: RunState.RUNNING.value if sub.started or sub.error else "queued"
            for run_id, sub in self.submitted.items()
        }

    def stop(self) -> None:
        """Cancel the tasks: the queued ones never start; a running one's Ray worker ends,
        and its supervisor has the run checkpoint and stop (``interrupted``)."""
        for sub in self.submitted.values():
            if sub.error is None:
                self.ray.cancel(sub.ref, force=True)

    def close(self) -> None:
        """At the end of the sweep: disconnect from Ray (a local instance started for the
        sweep stops). Tasks still there (the sweep failed) are cancelled first."""
        if self.submitted:
            self.stop()
            return  # the sweep still collects them; it calls close() again at its end
        self.connection.close()
