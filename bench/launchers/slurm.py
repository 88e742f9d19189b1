"""``--launcher slurm``: one SLURM job per run, submitted as job arrays through submitit.

Runs are grouped by their resources (partition, time, GPUs, CPUs, memory: defaults from the
command line, per-dataset overrides from a YAML file, see :func:`load_resources`); each group
is one job array whose parallelism is capped with ``--array-parallelism``. Each array task is
a small supervisor (:class:`SlurmRun`) that runs the run in a worker process, exactly as the
local launcher does, and records its exit code and stderr tail in the run store.

Timeouts and preemption: SLURM signals USR2 shortly before the time limit (submitit asks for
it); submitit then calls :meth:`SlurmRun.checkpoint`, which lets the worker checkpoint and exit
and returns the same run for submitit to requeue; the requeued job resumes from the
checkpoint. A preemption (SIGTERM) makes the worker checkpoint and exit ``interrupted``;
SLURM requeues the job (``--requeue``) and it resumes the same way.

The sweep process waits and prints the live summary; it may be stopped at any time (the jobs
keep going) and ``bench status`` follows them from any shell: every job id is recorded in
the sweep's manifest and, once it starts, in the run's ``status.json``.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from debias_bench.engine import DataPlace
from debias_bench.errors import ConfigError
from debias_bench.provenance import config_json
from debias_bench.registry import DATASETS
from debias_bench.states import FailReason, RunState
from debias_bench.store import RunStore
from debias_bench.tracking import TrackSpec

from .plugins import import_plugins, plugins_for
from .scheduler import Ended, Launcher, Task
from .slots import THREAD_VARS
from .worker import WorkerJob, WorkerProcess


# ------------------------------------------------------------------------------ resources
@dataclass(frozen=True)
class Resources:
    """What one run asks SLURM for."""

    partition: str | None = None
    time: str = "60"  # minutes, or [D-]HH:MM[:SS]
    gpus: int = 0
    cpus: int = 1
    mem: str | None = None  # e.g. "8G"; None: the partition's default
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None

    def minutes(self) -> int:
        return time_minutes(self.time)


def time_minutes(text: str | int) -> int:
    """SLURM time syntax -> minutes: ``90``, ``1:30:00``, ``2-00:00:00``, ``30:00`` (mm:ss)."""
    text = str(text).strip()
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not match:
        raise ConfigError(f"bad SLURM time {text!r}", hint="use minutes or [D-]HH:MM:SS")
    days, a, b, c = match.groups()
    if days is None and b is None:
        minutes = int(a)
    elif days is None and c is None:  # MM:SS
        minutes = int(a) + (int(b) > 0)
    else:  # [D-]HH[:MM[:SS]]
        minutes = int(days or 0) * 1440 + int(a) * 60 + int(b or 0) + (int(c or 0) > 0)
    return max(1, minutes)


@dataclass
class ResourceTable:
    default: Resources
    datasets: dict[str, dict[str, Any]]

    def for_dataset(self, dataset: str) -> Resources:
        return replace(self.default, **self.datasets.get(dataset, {}))


_KEYS = {f.name for f in fields(Resources)}


#: resource keys that are counts (the others are strings; ``time`` may also be minutes)
_COUNTS = ("gpus", "cpus")


def _check_keys(where: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping of resource keys, not {entry!r}")
    unknown = set(entry) - _KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown resource keys {sorted(unknown)}", hint=f"known: {sorted(_KEYS)}"
        )
    for key, value in entry.items():
        if key in _COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"{where}: {key} must be a whole number >= 0, not {value!r}")
        if key not in _COUNTS and value is not None and not isinstance(value, str | int):
            raise ConfigError(f"{where}: {key} must be a string, not {value!r}")
    return {k: (str(v) if k == "time" else v) for k, v in entry.items()}


def load_resources(path: str | None, overrides: dict[str, Any]) -> ResourceTable:
    """Built-in defaults < the file's ``default:`` < ``overrides`` (command line) < the file's
    ``datasets: {name: {...}}``. Example file::

        default: {partition: gpu, time: "4:00:00", gpus: 1, cpus: 4, mem: 16G}
        datasets:
          cmnist: {gpus: 0, cpus: 2, mem: 4G, time: 30}
          bffhq: {time: "12:00:00"}
    """
    doc: dict[str, Any] = {}
    if path:
        try:
            doc = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read --resources {path}: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"--resources {path} is not valid YAML: {exc}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"--resources {path}: expected keys default: and datasets:")
        unknown = set(doc) - {"default", "datasets"}
        if unknown:
            raise ConfigError(f"{path}: unknown top-level keys {sorted(unknown)}")
        if not isinstance(doc.get("datasets") or {}, dict):
            raise ConfigError(f"{path}: datasets: must map dataset names to resources")
        strangers = set(doc.get("datasets") or {}) - set(DATASETS.names())
        if strangers:
            raise ConfigError(
                f"{path}: unknown dataset(s) {sorted(strangers)} under datasets:",
                hint=f"registered: {', '.join(DATASETS.names())}",
            )
    default = Resources(**_check_keys(f"{path}: default", doc.get("default") or {}))
    default = replace(default, **_check_keys("command line", overrides))
    datasets = {
        name: _check_keys(f"{path}: datasets.{name}", entry or {})
        for name, entry in (doc.get("datasets") or {}).items()
    }
    time_minutes(default.time)
    for entry in datasets.values():
        if "time" in entry:
            time_minutes(entry["time"])
    return ResourceTable(default, datasets)


def executor_parameters(res: Resources, array_parallelism: int, name: str) -> dict[str, Any]:
    """submitit ``update_parameters`` arguments for ``res``."""
    params: dict[str, Any] = {
        "timeout_min": res.minutes(),
        "cpus_per_task": res.cpus,
        "tasks_per_node": 1,
        "nodes": 1,
        "name": name,
        "slurm_array_parallelism": array_parallelism,
        # a preempted job goes back to the queue and resumes from its checkpoint
        "slurm_additional_parameters": {"requeue": True},
    }
    if res.gpus:
        params["gpus_per_node"] = res.gpus
    if res.partition:
        params["slurm_partition"] = res.partition
    if res.mem:
        params["slurm_mem"] = res.mem
    for key in ("account", "qos", "constraint"):
        if getattr(res, key):
            params[f"slurm_{key}"] = getattr(res, key)
    return params


# ------------------------------------------------------------------------------ the job
class SlurmRun:
    """What each array task executes (pickled by submitit): a supervisor that runs one run
    in a worker process and records its exit. Checkpointable (see the module docstring)."""

    def __init__(self, job: WorkerJob, timeout_s: float | None = None) -> None:
        self.job, self.timeout_s = job, timeout_s
        self._worker: WorkerProcess | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"job": self.job, "timeout_s": self.timeout_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["job"], state["timeout_s"])  # type: ignore[misc]

    def __call__(self) -> str:
        # the supervisor records the exit, which needs the run's method and dataset registered
        import_plugins(self.job.plugins, self.job.sys_path)
        env = dict(os.environ)
        threads = os.environ.get("SLURM_CPUS_PER_TASK")
        if threads:
            env.update(dict.fromkeys(THREAD_VARS, threads))
        self._worker = WorkerProcess(self.job, env, self.timeout_s)
        self._worker.wait()
        return self._worker.finish()

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Called by submitit on USR2 (time limit or preemption): stop the worker at its next
        step (it checkpoints), then hand submitit the same run to requeue."""
        import submitit

        worker = self._worker
        if worker is not None and worker.proc.poll() is None:
            worker.terminate()
            deadline = time.monotonic() + 60
            while worker.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            worker.kill()
            worker.finish()
        return submitit.helpers.DelayedSubmission(SlurmRun(self.job, self.timeout_s))


# ------------------------------------------------------------------------------ the queue
def slurm_available() -> str | None:
    """None when a SLURM controller answers here, else why not."""
    if not shutil.which("sbatch") or not shutil.which("squeue"):
        return "sbatch/squeue not found (SLURM client not installed)"
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"scontrol ping failed: {exc}"
    if "is UP" not in out.stdout:
        first = ((out.stdout + out.stderr).strip().splitlines() or ["no answer"])[0]
        return f"no SLURM controller answers: {first[:200]}"
    return None


def squeue_states(user: str | None = None) -> dict[str, str] | None:
    """job id (``123`` or ``123_4`` for array tasks) -> SLURM state, for the jobs squeue still
    lists (pending, running, completing, ...); None when squeue cannot be asked."""
    cmd = ["squeue", "-h", "-r", "-u", user or getpass.getuser(), "-o", "%i|%T"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    states = {}
    for line in out.stdout.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id:
            states[job_id] = state
    return states


def queue_label(slurm_state: str) -> str:
    """A SLURM job state as the summary counts it."""
    queued = slurm_state in ("PENDING", "REQUEUED", "REQUEUE_HOLD")
    return "queued" if queued else RunState.RUNNING.value


class SlurmLauncher(Launcher):
    name = "slurm"
    poll_interval_s = 2.0

    def __init__(
        self,
        store: RunStore,
        place: DataPlace,
        resources: ResourceTable,
        array_parallelism: int = 64,
        max_attempts: int = 3,
        timeout_s: float | None = None,
        on_submitted: Any = None,
        job_name: str = "bench",
        track: Sequence[TrackSpec] = (),
    ) -> None:
        self.store, self.place, self.resources = store, place, resources
        self.array_parallelism, self.max_attempts = array_parallelism, max_attempts
        self.timeout_s, self.job_name, self.track = timeout_s, job_name, track
        self.on_submitted = on_submitted or (lambda jobs: None)
        self.folder = self.store.root.resolve() / ".submitit"
        self.jobs: dict[str, tuple[Task, Any]] = {}  # run id -> (task, submitit job)
        self.states: dict[str, str] = {}  # job id -> SLURM state, from the latest squeue
        self.last_poll = 0.0

    def free(self) -> int:
        return 1 << 30  # SLURM queues; the array's %N caps how many run at once

    def parallelism(self) -> int:
        running = sum(queue_label(s) == RunState.RUNNING for s in self.states.values())
        return max(1, running)

    def worker_job(self, task: Task, res: Resources) -> WorkerJob:
        plugins, paths = plugins_for([task.config])
        return WorkerJob(
            config=task.config.to_json(),
            out=str(self.store.root.resolve()),
            raw_root=str(Path(self.place.raw_root).resolve()),
            data_root=str(Path(self.place.data_root).resolve()),
            device="cuda" if res.gpus else "cpu",
            retry_failed=True,  # the scheduler decided
            max_attempts=self.max_attempts,
            plugins=plugins,
            sys_path=paths,
            status_fields={"launcher": self.name, "resources": asdict(res)},
            track=[spec.key for spec in self.track],
        )

    def start(self, tasks: list[Task]) -> None:
        import submitit

        groups: dict[Resources, list[Task]] = {}
        for task in tasks:
            groups.setdefault(self.resources.for_dataset(task.config.dataset), []).append(task)
        submitted = {}
        for res, group in groups.items():
            # Each time limit reached requeues the run, which resumes from its checkpoint.
            executor = submitit.AutoExecutor(
                folder=self.folder / "%j", cluster="slurm", slurm_max_num_timeout=20
            )
            executor.update_parameters(
                **executor_parameters(res, self.array_parallelism, self.job_name)
            )
            with executor.batch():
                jobs = [
                    executor.submit(SlurmRun(self.worker_job(t, res), self.timeout_s))
                    for t in group
                ]
            for task, job in zip(group, jobs, strict=True):
                self.jobs[task.run_id] = (task, job)
                self.states[job.job_id] = "PENDING"
                submitted[task.run_id] = job.job_id
        self.on_submitted(submitted)

    def poll(self) -> list[Ended]:
        if time.monotonic() - self.last_poll < self.poll_interval_s:
            return []
        self.last_poll = time.monotonic()
        states = squeue_states()
        if states is None:
            return []  # squeue did not answer; ask again next time
        ended = []
        for run_id, (task, job) in list(self.jobs.items()):
            if job.job_id in states:
                self.states[job.job_id] = states[job.job_id]
                continue
            del self.jobs[run_id]
            self.states.pop(job.job_id, None)
            ended.append(self._ended(task, job.job_id))
        return ended

    def log_path(self, job_id: str) -> Path:
        """submitit's stderr log of a job (array task ``A_a`` or plain job)."""
        return self.folder / job_id / f"{job_id}_0_log.err"

    def _ended(self, task: Task, job_id: str) -> Ended:
        """A job left the queue: what its run recorded, or, for a job that ended without
        letting its run record anything (cancelled while queued, killed with its
        supervisor, node failure), a failure recorded here."""
        run_dir = self.store.run(task.run_id)
        if run_dir.is_done():
            return Ended(task, RunState.DONE)
        fault = run_dir.fault()
        if fault:  # a torn status.json: the run is corrupt, named with its file and fix
            return Ended(task, RunState.CORRUPT, fault, ran=False)
        status, state = run_dir.status(), run_dir.effective_state()
        note = status.get("error") or status.get("reason") or status.get("note") or ""
        if state is RunState.RUNNING:  # another host, heartbeat still fresh: status tells later
            return Ended(task, RunState.RUNNING, f"SLURM job {job_id} left the queue", ran=False)
        ended_by_it = status.get("slurm_job_id") == job_id
        if state in (RunState.FAILED, RunState.INTERRUPTED, RunState.SKIPPED) and ended_by_it:
            return Ended(task, state, note)
        log = self.log_path(job_id)
        if state is RunState.DEAD:  # killed during the run: dead, as under inline and local
            note = f"SLURM job {job_id} ended while the run was running; a rerun resumes it"
            with run_dir.claim() as owned:
                if owned and run_dir.effective_state(owned=True) is RunState.DEAD:
                    run_dir.mark_dead(
                        note,
                        slurm_job_id=job_id,
                        stderr_tail=run_dir.log_tail(path=log),
                        ended=time.time(),
                    )
            return Ended(task, RunState.DEAD, note)
        with run_dir.claim() as owned:
            if owned:
                run_dir.plan(config_json(task.config))
                run_dir.transition(
                    RunState.FAILED,
                    reason=FailReason.NOT_STARTED,
                    error=f"SLURM job {job_id} ended before the run started; see {log}",
                    stderr_tail=run_dir.log_tail(path=log),
                    exit_code=None,
                    slurm_job_id=job_id,
                    ended=time.time(),
                )
        return Ended(task, RunState.FAILED, run_dir.status().get("error", ""))

    def active(self) -> dict[str, str]:
        return {
            run_id: queue_label(self.states.get(job.job_id, "PENDING"))
            for run_id, (_, job) in self.jobs.items()
        }

    def stop(self) -> None:
        for _, job in self.jobs.values():
            job.cancel(check=False)

    def detach(self) -> str:
        return (
            f"{len(self.jobs)} SLURM job(s) keep running; follow them with "
            f"`bench status --out {self.store.root}` (cancel with scancel)"
        )
