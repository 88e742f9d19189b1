"""``--launcher local``: each run in its own worker process, on a pool of CPU or GPU slots.

A crash, a ``kill -9`` or a hang of one run takes down no other: the launcher records the
worker's exit code and stderr tail and moves on (unless ``--fail-fast``). ``--timeout`` stops
a run that takes longer (SIGTERM, so it checkpoints; SIGKILL after a grace period).

Workers are warm (forked from a server that has imported torch and the plugins once, see
:mod:`.forkserver`) unless ``warm=False`` or ``BENCH_WORKER_START=cold``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from debias_bench.engine import DataPlace
from debias_bench.states import RunState
from debias_bench.store import RunStore
from debias_bench.tracking import TrackSpec

from . import forkserver
from .plugins import env_plugins, plugins_for
from .scheduler import Ended, Launcher, Task
from .slots import Slot, SlotPool
from .worker import WorkerJob, WorkerProcess


@dataclass
class _Active:
    task: Task
    slot: Slot
    worker: WorkerProcess


class LocalLauncher(Launcher):
    name = "local"

    def __init__(
        self,
        store: RunStore,
        place: DataPlace,
        slots: list[Slot],
        max_attempts: int = 3,
        timeout_s: float | None = None,
        grace_s: float = 30.0,
        warm: bool = True,
        track: Sequence[TrackSpec] = (),
    ) -> None:
        self.store, self.place = store, place
        self.pool = SlotPool(slots)
        self.max_attempts, self.track = max_attempts, track
        self.timeout_s, self.grace_s = timeout_s, grace_s
        self.running: dict[str, _Active] = {}
        self.warm = warm and forkserver.available()
        if self.warm:  # the server imports while the sweep plans its runs
            forkserver.warm_context(env_plugins())

    def free(self) -> int:
        return self.pool.free()

    def parallelism(self) -> int:
        return len(self.pool.slots)

    def job(self, task: Task, slot: Slot) -> WorkerJob:
        plugins, paths = plugins_for([task.config])
        return WorkerJob(
            config=task.config.to_json(),
            out=str(self.store.root.resolve()),
            raw_root=str(self.place.raw_root),
            data_root=str(self.place.data_root),
            device=slot.device,
            # the scheduler retries only what may be retried: let the worker agree
            retry_failed=True,
            max_attempts=self.max_attempts,
            plugins=plugins,
            sys_path=paths,
            status_fields={"gpu": slot.gpu, "slot": slot.index, "launcher": self.name},
            track=[spec.key for spec in self.track],
            planned_id=task.run_id,
        )

    def start(self, tasks: list[Task]) -> None:
        for task in tasks:
            slot = self.pool.acquire()
            assert slot is not None, "start() called with more tasks than free() slots"
            job = self.job(task, slot)
            worker = WorkerProcess(job, slot.env(), self.timeout_s, self.grace_s, warm=self.warm)
            self.running[task.run_id] = _Active(task, slot, worker)

    def poll(self) -> list[Ended]:
        ended = []
        for run_id, active in list(self.running.items()):
            if active.worker.poll() is None:
                continue
            state = active.worker.finish()
            self.pool.release(active.slot)
            del self.running[run_id]
            status = active.worker.run_dir.status()
            note = status.get("error") or status.get("reason") or ""
            ended.append(Ended(active.task, state, note, ran=state is not RunState.RUNNING))
        return ended

    def active(self) -> dict[str, str]:
        return dict.fromkeys(self.running, RunState.RUNNING.value)

    def stop(self) -> None:
        for active in self.running.values():
            active.worker.terminate()

    def close(self) -> None:
        for active in self.running.values():
            active.worker.kill()
