"""What ``--track`` costs a run (``bench perf --track-overhead``).

Pairs of identical runs (Vanilla on the ``ci`` preset's 6,000-image Colored MNIST subset, 800
steps, an evaluation every 200 steps: the ``paper`` preset's cadence, one evaluation per epoch
of about 210 steps on the full training set) run in this process: one without tracking, one sent
to a tracker (default: an MLflow SQLite store in the run store). The two alternate (and which
goes first alternates too), after one untimed warm-up run, so a load on the machine falls on
both alike. A run's throughput is its steps over its whole wall time, from :func:`run_one`'s
call to its return: the tracker's set-up, every evaluation's metrics and the final artifacts
are all inside it (and weigh more here than in a paper-length run, whose set-up is spread over
100-200 epochs). The cost is one minus the median over pairs of (tracked steps/s) /
(untracked steps/s).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from debias_bench.config.grid import Grid, expand
from debias_bench.config.run_config import RunConfig
from debias_bench.launchers.run_one import plan, run_one
from debias_bench.paths import DataPlace
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.tracking.spec import parse_specs, prepare_trackers
from debias_bench.training.engine import load_data

#: each run: 800 steps of the ci preset's Colored MNIST subset, evaluated every 200 steps
RUN = {"steps": 800, "eval_every": 200}


@dataclass
class TrackCost:
    target: str  # the --track value measured, e.g. "mlflow"
    plain: list[float] = field(default_factory=list)  # steps/s per run, untracked
    tracked: list[float] = field(default_factory=list)  # steps/s per run, tracked
    #: per tracked run: seconds inside the tracker's calls, and the run's wall seconds
    inside: list[tuple[float, float]] = field(default_factory=list)
    failed: int = 0

    @property
    def cost(self) -> float:
        """The throughput lost to tracking (0.01: 1 %), from the median paired ratio."""
        ratios = [t / p for p, t in zip(self.plain, self.tracked, strict=True)]
        return 1.0 - statistics.median(ratios) if ratios else float("nan")

    def line(self) -> str:
        plain, tracked = statistics.median(self.plain), statistics.median(self.tracked)
        spent, wall = (statistics.median(v) for v in zip(*self.inside, strict=True))
        text = (
            f"--track {self.target}: {tracked:.1f} steps/s against {plain:.1f} without "
            f"(median of {len(self.plain)} pairs), cost {100 * self.cost:+.2f} %; inside the "
            f"tracker's calls {spent:.2f} s of a {wall:.1f} s run ({100 * spent / wall:.2f} %)"
        )
        return text + (f"; {self.failed} FAILED" if self.failed else "")


def _configs() -> list[RunConfig]:
    """The one run every measurement repeats (Vanilla, ci preset, :data:`RUN`)."""
    grid = Grid(["vanilla"], ["cmnist"], [5.0], [0], "clean", "ci", overrides=dict(RUN))
    return expand(grid)[0]


def _timed_run(out: Path, track: list[str], place: DataPlace) -> tuple[float, float] | None:
    """One run into the fresh store ``out``: its wall seconds and the seconds inside its
    trackers' calls (``spent_s`` of its ``tracking.json``); None when it did not finish."""
    configs = _configs()
    store = RunStore(out)
    specs = parse_specs(track, store.root)
    plan(store, configs)
    prepare_trackers(specs, store.root)  # as `bench run` does before any run starts
    started = time.perf_counter()
    outcome = run_one(configs[0], store, place, torch.device("cpu"), track=specs)
    wall = time.perf_counter() - started
    if outcome.state is not RunState.DONE:
        return None
    spent = sum(float(c.get("spent_s") or 0.0) for c in outcome.run_dir.tracking().values())
    return wall, spent


def track_overhead(pairs: int, place: DataPlace, target: str = "mlflow") -> TrackCost:
    """``pairs`` untracked/tracked run pairs, each run in a fresh store (the data prepared
    first, so neither pays for building it)."""
    parse_specs([target], Path(tempfile.gettempdir()))  # an unknown or missing tracker: exit 2
    load_data(_configs()[0], place)
    result = TrackCost(target)
    with tempfile.TemporaryDirectory(prefix="bench-track-cost-") as tmp:
        _timed_run(Path(tmp) / "warm-up", [target], place)  # first-run costs: neither pays
        for index in range(pairs):
            order = [("plain", []), ("tracked", [target])]
            if index % 2:  # alternate which goes first
                order.reverse()
            timed = {name: _timed_run(Path(tmp) / f"{name}-{index}", track, place)
                     for name, track in order}  # fmt: skip
            plain, tracked = timed["plain"], timed["tracked"]
            if plain is None or tracked is None:
                result.failed += 1
                continue
            result.plain.append(RUN["steps"] / plain[0])
            result.tracked.append(RUN["steps"] / tracked[0])
            result.inside.append((tracked[1], tracked[0]))
    return result
