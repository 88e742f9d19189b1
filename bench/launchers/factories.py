"""The launchers `bench run --launcher NAME` can build, registered like methods and datasets.

Each entry builds its launcher from the parsed command line and a :class:`LaunchContext`; its
metadata says how the sweep treats it (``where``: the phrase the start line prints;
``catches_sigint``: Ctrl-C goes to the running run itself, not to the sweep; ``kill_on_second
_signal``: a second SIGTERM/SIGINT kills its workers at once). A new launcher is one more
registered function, not another branch in the CLI.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

from debias_bench.engine import DataPlace, Progress, resolve_device
from debias_bench.errors import ConfigError
from debias_bench.registry import Registry
from debias_bench.store import RunStore
from debias_bench.tracking import TrackSpec

from .scheduler import Launcher, Task
from .slots import Slot, plan_slots, visible_gpus


@dataclass(frozen=True)
class LaunchContext:
    """What every launcher gets besides the command line."""

    store: RunStore
    place: DataPlace
    timeout_s: float | None
    should_stop: Callable[[], bool]  # the sweep was asked to stop (a signal)
    on_submitted: Callable[[dict[str, str]], None]  # run id -> cluster job id
    progress: Callable[[Task], Progress]  # a progress display for a run in this process
    track: tuple[TrackSpec, ...] = ()  # experiment trackers every run is sent to


Factory = Callable[[argparse.Namespace, LaunchContext], Launcher]

LAUNCHERS: Registry[Factory] = Registry("launcher")


@LAUNCHERS.register(
    "inline",
    display_name="in this process, one run after another",
    where="in this process on {device}",
    catches_sigint=True,
    kill_on_second_signal=False,
)
def inline(args: argparse.Namespace, ctx: LaunchContext) -> Launcher:
    from .inline import InlineLauncher

    if ctx.timeout_s:
        raise ConfigError("--timeout needs --launcher local or slurm (a run in a process)")
    return InlineLauncher(
        ctx.store,
        ctx.place,
        resolve_device(args.device),
        progress=ctx.progress,
        should_stop=ctx.should_stop,
        max_attempts=args.max_attempts,
        track=ctx.track,
    )


@LAUNCHERS.register(
    "local",
    display_name="worker processes on this machine (CPU or GPU slots)",
    where="on {parallelism} local worker(s)",
    catches_sigint=False,
    kill_on_second_signal=True,
)
def local(args: argparse.Namespace, ctx: LaunchContext) -> Launcher:
    from .local import LocalLauncher

    return LocalLauncher(
        ctx.store,
        ctx.place,
        local_slots(args),
        max_attempts=args.max_attempts,
        timeout_s=ctx.timeout_s,
        grace_s=args.grace,
        track=ctx.track,
    )


@LAUNCHERS.register(
    "slurm",
    display_name="SLURM jobs through submitit",
    where="on SLURM",
    catches_sigint=False,
    kill_on_second_signal=False,
)
def slurm(args: argparse.Namespace, ctx: LaunchContext) -> Launcher:
    from .slurm import SlurmLauncher, load_resources, slurm_available

    flags = {
        "partition": args.partition,
        "time": args.time,
        "gpus": args.gpus_per_run,
        "cpus": args.cpus_per_run,
        "mem": args.mem_per_run,
    }
    resources = load_resources(args.resources, {k: v for k, v in flags.items() if v is not None})
    why = slurm_available()
    if why:
        raise ConfigError(f"--launcher slurm: {why}", hint="scripts/slurm_local_cluster.sh")
    return SlurmLauncher(
        ctx.store,
        ctx.place,
        resources,
        array_parallelism=args.array_parallelism,
        max_attempts=args.max_attempts,
        timeout_s=ctx.timeout_s,
        on_submitted=ctx.on_submitted,
        track=ctx.track,
    )


def local_slots(args: argparse.Namespace) -> list[Slot]:
    """The local launcher's slots for ``--device``, ``--workers`` and ``--jobs-per-gpu``."""
    import torch

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    gpus: list[str] = []
    if device.startswith("cuda"):
        resolve_device(device)  # a clear error when no GPU is visible
        gpus = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count())
        if ":" in device:
            index = int(device.split(":", 1)[1])
            if index >= len(gpus):
                raise ConfigError(f"--device {device}: only {len(gpus)} GPU(s) visible")
            gpus = [gpus[index]]
    return plan_slots(args.workers, gpus, args.jobs_per_gpu)
