"""``--launcher local``: each run in its own worker process, on a pool of CPU or GPU slots.

A crash, a ``kill -9`` or a hang of one run takes down no other: the launcher records the
worker's exit code and stderr tail and moves on (unless ``--fail-fast``). ``--timeout`` stops
a run that takes longer (SIGTERM, so it checkpoints; SIGKILL after a grace period).

Workers are warm (forked from a server that has imported torch and the plugins once, see
:mod:`.forkserver`) unless ``warm=False`` or ``BENCH_WORKER_START=cold``.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from debias_bench.config.hparams import MAX_THREADS
from debias_bench.errors import ConfigError
from debias_bench.launchers.preflight import check_worker_imports
from debias_bench.plugins.loading import env_plugins
from debias_bench.runs.states import RunState
from debias_bench.training.devices import resolve_device

from . import forkserver
from .factories import Launchable, LaunchContext, register_launcher
from .job import WorkerJob
from .options import LauncherOption, LauncherOptions
from .packing import AUTO, Cell, Gpu, choose, gpu_inventory, read_perf
from .process import WorkerProcess
from .scheduler import Ended, Launcher, Task
from .slots import (
    Slot,
    SlotPool,
    cpu_cores,
    crowding_now,
    plan_slots,
    user_threads,
    visible_gpus,
)

#: the most workers or runs per GPU a flag may ask for: far beyond any machine, short of a typo
MAX_WORKERS = 1024


@dataclass
class _Active:
    task: Task
    slot: Slot
    worker: WorkerProcess


@register_launcher(
    "local",
    display_name="worker processes on this machine (CPU or GPU slots)",
    where="on {parallelism} local worker(s)",
)
class LocalLauncher(Launchable):
    def __init__(self, ctx: LaunchContext, slots: list[Slot], warm: bool = True) -> None:
        self.ctx, self.pool = ctx, SlotPool(slots)
        self.running: dict[str, _Active] = {}
        self.server_deaths: set[str] = set()  # told once each
        self.warm = warm and forkserver.available()
        if self.warm:  # the server imports while the sweep plans its runs
            forkserver.warm_context(env_plugins())

    options = (
        LauncherOption(
            "workers",
            "int",
            "local: worker processes (default: every GPU slot, or 1 on CPU)",
            low=1,
            high=MAX_WORKERS,
        ),
        LauncherOption(
            "jobs_per_gpu",
            "int",
            "local: runs sharing one GPU (default 1); auto: as many as the sweep's cells fit "
            "by their `bench perf` peak memory and step time (--perf-json)",
            1,
            1,
            MAX_WORKERS,
            words=(AUTO,),
        ),
        LauncherOption(
            "perf_json",
            "str",
            "local: the `bench perf --device cuda --json` file --jobs-per-gpu auto reads "
            "(default: perf.json in --out)",
            metavar="FILE",
        ),
        LauncherOption(
            "threads",
            "int",
            "local: CPU threads per worker (default: OMP_NUM_THREADS when set, else the "
            "cores this process may use shared among the workers)",
            low=1,
            high=MAX_THREADS,
        ),
    )

    @classmethod
    def from_options(cls, options: LauncherOptions, ctx: LaunchContext) -> Launcher:

        check_worker_imports(cls.name)  # torchvision, once here rather than in every worker
        if options.perf_json is not None and options.jobs_per_gpu != AUTO:
            raise ConfigError(
                "--perf-json is read by --jobs-per-gpu auto only",
                hint="add --jobs-per-gpu auto, or leave out --perf-json",
            )
        perf_json = Path(options.perf_json or ctx.store.root / "perf.json")
        slots = local_slots(
            ctx.device,
            options.workers,
            options.jobs_per_gpu,
            options.threads,
            auto=lambda gpus: auto_jobs(ctx.cells, perf_json, gpus),
        )
        return cls(ctx, slots)

    def free(self) -> int:
        return self.pool.free()

    def parallelism(self) -> int:
        return len(self.pool.slots)

    def crowding(self) -> str | None:
        return crowding_now(self.pool.slots)

    def job(self, task: Task, slot: Slot) -> WorkerJob:
        return self.ctx.worker_job(
            task, slot.device, gpu=slot.gpu, slot=slot.index, launcher=self.name
        )

    def start(self, tasks: list[Task]) -> None:
        for task in tasks:
            slot = self.pool.acquire()
            assert slot is not None, "start() called with more tasks than free() slots"
            job = self.job(task, slot)
            worker = WorkerProcess(
                job, slot.env(), self.ctx.timeout_s, self.ctx.grace_s, warm=self.warm
            )
            self.running[task.run_id] = _Active(task, slot, worker)

    def poll(self) -> list[Ended]:
        ended = []
        for run_id, active in list(self.running.items()):
            if active.worker.poll() is not None:
                died = active.worker.server_died
                if died is not None and died not in self.server_deaths:
                    self.server_deaths.add(died)
                    print(
                        f"    the warm worker server died ({died}): its runs checkpointed and "
                        "stopped (interrupted: a rerun resumes them); the next runs start "
                        "from a new server",
                        file=sys.stderr,
                        flush=True,
                    )
                ended.append(active.worker.ended(active.task))
                self.pool.release(active.slot)
                del self.running[run_id]
        return ended

    def wait(self, timeout_s: float) -> None:
        """Until a warm worker exits (its slot then takes the next run at once, not at the
        next poll), at most ``timeout_s``."""
        handles = [h for a in self.running.values() if (h := a.worker.exit_handle) is not None]
        if handles:
            multiprocessing.connection.wait(handles, timeout_s)
        else:
            time.sleep(timeout_s)

    def active(self) -> dict[str, str]:
        return dict.fromkeys(self.running, RunState.RUNNING.value)

    def stop(self) -> None:
        for active in self.running.values():
            active.worker.terminate()

    def close(self) -> None:
        for active in self.running.values():
            active.worker.kill()


def local_slots(
    device: str,
    workers: int | None,
    jobs_per_gpu: int | str = 1,
    threads: int | None = None,
    auto: Callable[[list[int]], int] | None = None,
) -> list[Slot]:
    """The local launcher's slots for ``--device``, ``--workers``, ``--jobs-per-gpu`` and
    ``--threads`` (default: ``OMP_NUM_THREADS`` when the user set it). ``--jobs-per-gpu auto``
    asks ``auto`` for the number, given this process's indices of the sweep's GPUs."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    gpus: list[str] = []
    indices: list[int] = []
    if device.startswith("cuda"):
        resolve_device(device)  # a clear error when no GPU is visible
        gpus = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count())
        indices = list(range(len(gpus)))
        if ":" in device:
            index = int(device.split(":", 1)[1])
            if index >= len(gpus):
                raise ConfigError(f"--device {device}: only {len(gpus)} GPU(s) visible")
            gpus, indices = [gpus[index]], [index]
    if jobs_per_gpu == AUTO:
        if not gpus:
            raise ConfigError(
                f"--jobs-per-gpu auto packs runs on GPUs, and this sweep runs on the CPU "
                f"(--device {device}{'' if torch.cuda.is_available() else '; no GPU visible'})",
                hint="CPU runs use --workers N (the cores are shared among the N workers)",
            )
        if auto is None:
            raise TypeError("local_slots: jobs_per_gpu='auto' needs auto=")
        jobs_per_gpu = auto(indices)
    assert isinstance(jobs_per_gpu, int)
    return plan_slots(workers, gpus, jobs_per_gpu, threads=threads or user_threads(os.environ))


def auto_jobs(
    cells: Iterable[Cell],
    perf_json: Path,
    indices: list[int],
    inventory: Callable[[list[int]], list[Gpu]] = gpu_inventory,
) -> int:
    """``--jobs-per-gpu auto`` for a sweep of ``cells`` on the GPUs at ``indices``
    (:mod:`.packing`), with the lines that say how it chose, on stderr."""
    packing = choose(cells, read_perf(perf_json), inventory(indices), cpu_cores())
    for line in packing.lines():
        print(line, file=sys.stderr, flush=True)
    return packing.jobs
