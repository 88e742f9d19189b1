"""What the local launcher costs per run (``bench perf --launcher-overhead``).

N tiny Colored MNIST runs (Vanilla, the ``ci`` preset's 6,000-image subset, a few steps and
one evaluation) go through the local launcher on one worker, exactly as ``bench run
--launcher local`` would run them, once with warm workers (forked from a server that has
imported torch and the plugins, see ``debias_bench.launchers.forkserver``) and once with cold
ones (a fresh interpreter per run). The overhead per run is the sweep's wall time minus the
runs' own training time (``train_time_s`` of their results), divided by N: interpreter start,
imports, data loading, model set-up, evaluation, the store's bookkeeping and the launcher's
polling. The warm figure includes starting the server once, spread over the N runs.
"""

from __future__ import annotations

import io
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from debias_bench.config.grid import Grid, expand
from debias_bench.launchers import LiveSummary, schedule
from debias_bench.launchers.factories import LaunchContext
from debias_bench.launchers.local import LocalLauncher
from debias_bench.launchers.slots import plan_slots
from debias_bench.paths import DataPlace
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import load_data

#: each tiny run: Vanilla on the ci preset's Colored MNIST subset, evaluated once at the end
TINY = {"steps": 20, "eval_every": 20}


@dataclass
class Overhead:
    mode: str  # warm | cold
    runs: int
    wall_s: float
    train_s: float
    failed: int = 0

    @property
    def per_run_s(self) -> float:
        return (self.wall_s - self.train_s) / max(1, self.runs)

    def line(self) -> str:
        text = f"launcher overhead: {self.per_run_s:.1f} s per run ({self.mode} workers"
        text += f"; {self.runs} runs, {self.wall_s:.1f} s wall, {self.train_s:.1f} s training)"
        return text + (f"; {self.failed} FAILED" if self.failed else "")


def tiny_grid(runs: int) -> Grid:
    return Grid(
        methods=["vanilla"],
        datasets=["cmnist"],
        ratios=[5.0],
        seeds=list(range(runs)),
        protocol="clean",
        preset="ci",
        overrides=dict(TINY),
    )


def measure(mode: str, runs: int, place: DataPlace, out: Path) -> Overhead:
    """Run ``runs`` tiny runs through the local launcher with ``mode`` (warm | cold) workers
    into the fresh store ``out``."""
    configs, _ = expand(tiny_grid(runs))
    store = RunStore(out)
    started = time.perf_counter()
    launcher = LocalLauncher(LaunchContext(store, place), plan_slots(1, []), warm=mode == "warm")
    sweep = schedule(launcher, configs, store, live=LiveSummary(runs, io.StringIO()))
    wall = time.perf_counter() - started
    train = sum((o.result or {}).get("train_time_s", 0.0) for o in sweep.outcomes)
    failed = sum(o.state is not RunState.DONE for o in sweep.outcomes)
    return Overhead(mode, runs, wall, train, failed)


def launcher_overhead(
    runs: int, place: DataPlace, modes: tuple[str, ...] = ("warm", "cold")
) -> list[Overhead]:
    """One :class:`Overhead` per mode, each on a fresh store (the data prepared first, so
    neither pays for building it)."""
    configs, _ = expand(tiny_grid(1))
    load_data(configs[0], place)  # prepares Colored MNIST when it is not yet
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        return [measure(mode, runs, place, Path(tmp) / mode) for mode in modes]
