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

Where submitit keeps its files: each job is a pickle (``<job>_submitted.pkl``) that the compute
node unpickles, that is runs, as the submitting user when the job starts. The run store is often
shared (others write into it), and a pickle others can write is code they can run as us, so
submitit's folder is never in the store: it is the user's own (:func:`submitit_folder`,
``$BENCH_SUBMITIT_DIR`` or ``~/.local/state/debias-bench/submitit``, one subfolder per store),
created with mode 0700 and refused (a ConfigError, before anything is submitted) when anyone
else could write it or replace it (:func:`check_private`). It must be on a file system the
compute nodes share, as the store must.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from debias_bench.config.hparams import MAX_THREADS
from debias_bench.errors import ConfigError
from debias_bench.launchers.run_one import record_not_started
from debias_bench.plugins.loading import import_plugins
from debias_bench.runs.states import RunState

from .factories import Launchable, LaunchContext, register_launcher
from .job import WorkerJob
from .options import LauncherOption, LauncherOptions
from .process import WorkerProcess
from .scheduler import Ended, Launcher, Task
from .slots import THREAD_VARS
from .slurm_queue import queue_label, slurm_available, squeue_states
from .slurm_resources import Resources, ResourceTable, executor_parameters, load_resources


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


#: the most runs of one job array at once a flag may ask for
MAX_ARRAY_PARALLELISM = 100_000
#: the folder under which submitit keeps its jobs' pickles and logs (default: the user's state)
SUBMITIT_ENV = "BENCH_SUBMITIT_DIR"


def submitit_folder(store_root: Path) -> Path:
    """Where submitit keeps the jobs of the store at ``store_root``: a folder of the user's
    own, outside the store, checked by :func:`check_private` (the module docstring says why)."""
    env = os.environ.get(SUBMITIT_ENV)
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    root = Path(env).expanduser() if env else Path(state) / "debias-bench" / "submitit"
    store = Path(store_root).resolve()
    key = hashlib.sha256(str(store).encode()).hexdigest()[:12]
    return check_private(root) / f"{store.name}-{key}"


def check_private(root: Path) -> Path:
    """``root`` created (mode 0700) and resolved; a ConfigError unless the user alone can write
    it and no one else can replace it: it and every folder above it are the user's or root's,
    and none is writable by group or others (but a sticky one, such as /tmp)."""
    root = Path(os.path.abspath(root))
    fix = (
        f"set {SUBMITIT_ENV} to a folder only you can write (mode 0700), on a file system the "
        "compute nodes share"
    )
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        root = root.resolve()
        found = [(folder, folder.stat()) for folder in (root, *root.parents)]
    except OSError as exc:
        raise ConfigError(f"--launcher slurm: cannot create {root}: {exc}", hint=fix) from None
    me = os.getuid()
    for folder, st in found:
        open_to_others = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if folder == root and (st.st_uid != me or open_to_others):
            raise ConfigError(
                f"--launcher slurm: submitit's folder {root} is not yours alone (owner uid "
                f"{st.st_uid}, mode {stat.filemode(st.st_mode)}): a job's pickle there could "
                "be replaced before the job starts, and run as you",
                hint=f"chmod 700 {root} and check what it holds; or {fix}",
            )
        if st.st_uid not in (me, 0) or (open_to_others and not st.st_mode & stat.S_ISVTX):
            raise ConfigError(
                f"--launcher slurm: {folder}, above submitit's folder {root}, can be written "
                f"by others (owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}): they "
                "could put their own folder in its place",
                hint=fix,
            )
    return root


@register_launcher(
    "slurm",
    display_name="SLURM jobs through submitit",
    where="on SLURM",
    kill_on_second_signal=False,
)
class SlurmLauncher(Launchable):
    poll_interval_s = 2.0

    def __init__(
        self,
        ctx: LaunchContext,
        resources: ResourceTable,
        array_parallelism: int = 64,
        job_name: str = "bench",
    ) -> None:
        self.ctx, self.store, self.resources = ctx, ctx.store, resources
        self.array_parallelism, self.job_name = array_parallelism, job_name
        self.folder = submitit_folder(self.store.root)  # never in the (shared) store
        self.jobs: dict[str, tuple[Task, Any]] = {}  # run id -> (task, submitit job)
        self.states: dict[str, str] = {}  # job id -> SLURM state, from the latest squeue
        self.last_poll = 0.0

    #: defaults for every run; per dataset: ``resources``
    options = (
        LauncherOption("partition", "str", "slurm: the partition of every run"),
        LauncherOption(
            "time", "str", "slurm: time limit per run: minutes or [D-]HH:MM:SS (default 60)"
        ),
        LauncherOption("gpus_per_run", "int", "slurm: GPUs per run", low=0, high=64),
        LauncherOption("cpus_per_run", "int", "slurm: CPUs per run", low=1, high=MAX_THREADS),
        LauncherOption("mem_per_run", "str", "slurm: memory per run, e.g. 16G"),
        LauncherOption(
            "resources",
            "str",
            "slurm: YAML with default: and datasets: {name: {time, gpus, ...}}",
            metavar="YAML",
        ),
        LauncherOption(
            "array_parallelism",
            "int",
            "slurm: runs of one array at once (default 64)",
            64,
            1,
            MAX_ARRAY_PARALLELISM,
        ),
    )

    @classmethod
    def from_options(cls, options: LauncherOptions, ctx: LaunchContext) -> Launcher:
        flags = {
            "partition": options.partition,
            "time": options.time,
            "gpus": options.gpus_per_run,
            "cpus": options.cpus_per_run,
            "mem": options.mem_per_run,
        }
        given = {key: value for key, value in flags.items() if value is not None}
        resources = load_resources(options.resources, given)
        why = slurm_available()
        if why:
            raise ConfigError(f"--launcher slurm: {why}", hint="scripts/slurm_local_cluster.sh")
        return cls(ctx, resources, array_parallelism=options.array_parallelism)

    def free(self) -> int:
        return 1 << 30  # SLURM queues; the array's %N caps how many run at once

    def parallelism(self) -> int:
        running = sum(queue_label(s) == RunState.RUNNING for s in self.states.values())
        return max(1, running)

    def worker_job(self, task: Task, res: Resources) -> WorkerJob:
        device = "cuda" if res.gpus else "cpu"
        return self.ctx.worker_job(task, device, launcher=self.name, resources=asdict(res))

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
                    executor.submit(SlurmRun(self.worker_job(t, res), self.ctx.timeout_s))
                    for t in group
                ]
            for task, job in zip(group, jobs, strict=True):
                self.jobs[task.run_id] = (task, job)
                self.states[job.job_id] = "PENDING"
                submitted[task.run_id] = job.job_id
        self.ctx.on_submitted(submitted)

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
        error = record_not_started(
            run_dir,
            task.config,
            f"SLURM job {job_id} ended before the run started; see {log}",
            stderr_tail=run_dir.log_tail(path=log),
            slurm_job_id=job_id,
        )
        return Ended(task, RunState.FAILED, error)

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
