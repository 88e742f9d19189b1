"""Worker slots of the local launcher: which device each worker uses and how many threads.

GPUs: the devices are those ``CUDA_VISIBLE_DEVICES`` names (all of them when it is unset), in
its order and with its spelling (indices, UUIDs or MIG ids are passed through unchanged).
Each device has ``jobs_per_gpu`` slots; a run is pinned to its slot's device by giving its
worker ``CUDA_VISIBLE_DEVICES=<that device>``, so it sees one GPU, ``cuda:0``. A slot is taken
on the least busy device, so runs spread over the devices before they share one, and a
device never holds more runs than it has slots.

Threads: each worker gets ``--threads`` threads when given, else ``OMP_NUM_THREADS`` when the
user set it (as torch honours it in one process), else ``cores // workers`` (at least one), set
through ``OMP_NUM_THREADS`` and friends and ``torch.set_num_threads`` in the worker. The cores
are those this process may run on (``taskset``, a Slurm allocation). Two sweeps on one machine
each take all of them unless told otherwise: :func:`oversubscription` says so when the cores are
already busy as a sweep starts (two such sweeps ran Colored MNIST 5-10x slower here).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from debias_bench.errors import ConfigError

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BENCH_THREADS")


@dataclass(frozen=True)
class Slot:
    index: int
    gpu: str | None  # the device as CUDA_VISIBLE_DEVICES names it; None: a CPU slot
    threads: int

    @property
    def device(self) -> str:
        """The device the worker trains on, as it sees it."""
        return "cpu" if self.gpu is None else "cuda"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The worker's environment: its device and its share of the cores."""
        env = dict(os.environ if base is None else base)
        env.update({name: str(self.threads) for name in THREAD_VARS})
        # A CPU worker sees no GPU at all, so nothing lands on one by accident.
        env["CUDA_VISIBLE_DEVICES"] = "" if self.gpu is None else self.gpu
        return env


def visible_gpus(cuda_visible_devices: str | None, device_count: int) -> list[str]:
    """The GPUs a process may use: ``CUDA_VISIBLE_DEVICES`` when set (CUDA ignores everything
    from the first ``-1`` on), else ``0 .. device_count-1``."""
    if cuda_visible_devices is None:
        return [str(i) for i in range(device_count)]
    out = []
    for item in cuda_visible_devices.split(","):
        item = item.strip()
        if not item or item == "-1":
            break
        if item in out:
            raise ConfigError(f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} repeats {item}")
        out.append(item)
    return out


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def user_threads(env: Mapping[str, str]) -> int | None:
    """The threads per process the user asked for with ``OMP_NUM_THREADS``; None when unset or
    not a positive whole number (as OpenMP ignores it then)."""
    value = env.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def plan_slots(
    workers: int | None,
    gpus: list[str],
    jobs_per_gpu: int = 1,
    cores: int | None = None,
    threads: int | None = None,
) -> list[Slot]:
    """Slots for ``workers`` workers (default: every GPU slot, or one CPU worker), each with
    ``threads`` threads (default: the cores shared among the workers)."""
    cores = cores or cpu_cores()
    if jobs_per_gpu < 1:
        raise ConfigError(f"--jobs-per-gpu must be at least 1, not {jobs_per_gpu}")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be at least 1, not {workers}")
    if not gpus:
        n = workers or 1
        return [Slot(i, None, threads or max(1, cores // n)) for i in range(n)]
    capacity = len(gpus) * jobs_per_gpu
    if workers is not None and workers > capacity:
        raise ConfigError(
            f"--workers {workers} is more than {len(gpus)} GPU(s) x --jobs-per-gpu {jobs_per_gpu}",
            hint=f"raise --jobs-per-gpu to {-(-workers // len(gpus))} or use --workers {capacity}",
        )
    n = workers or capacity
    order = [gpu for _ in range(jobs_per_gpu) for gpu in gpus]  # 3,5,3,5: spread first
    return [Slot(i, order[i], threads or max(1, cores // n)) for i in range(n)]


def oversubscription(slots: list[Slot], cores: int, load: float) -> str | None:
    """Why the CPU workers of ``slots`` would oversubscribe ``cores`` that already carry a load
    average of ``load`` (another sweep, a build), with the two fixes; None when they fit, and
    when each worker has one thread already (nothing of this sweep's to lower). A load under
    one is taken as noise."""
    cpu = [slot for slot in slots if slot.gpu is None]
    wanted = sum(slot.threads for slot in cpu)
    if max((s.threads for s in cpu), default=0) < 2 or load < 1 or load + wanted <= cores + 0.5:
        return None
    threads = max(1, int(cores - load + 0.5) // len(slots))
    return (
        f"the {cores} cores this sweep may use already carry a load of {load:.1f}, and its "
        f"{len(slots)} CPU worker(s) x {slots[0].threads} thread(s) would oversubscribe them "
        "(runs then train several times slower); give it fewer threads "
        f"(OMP_NUM_THREADS={threads} bench run ..., or --threads {threads} under --launcher "
        "local) or cores of its own (taskset -c ... bench run ...)"
    )


def crowding_now(slots: list[Slot]) -> str | None:
    """:func:`oversubscription` of ``slots`` on this machine's cores and load, now."""
    return oversubscription(slots, cpu_cores(), os.getloadavg()[0])


class SlotPool:
    """Free and busy slots; a slot is taken on the least busy device."""

    def __init__(self, slots: list[Slot]) -> None:
        self.slots = list(slots)
        self.busy: set[int] = set()

    def free(self) -> int:
        return len(self.slots) - len(self.busy)

    def acquire(self) -> Slot | None:
        load = Counter(self.slots[i].gpu for i in self.busy)
        free = [s for s in self.slots if s.index not in self.busy]
        if not free:
            return None
        slot = min(free, key=lambda s: (load[s.gpu], s.index))
        self.busy.add(slot.index)
        return slot

    def release(self, slot: Slot) -> None:
        self.busy.discard(slot.index)

    def per_device(self) -> Counter:
        return Counter(self.slots[i].gpu for i in self.busy)
