"""``debias_bench.run`` (and ``bench run``): plan a grid of runs, check it, execute it, and
say how it ended, as data.

:class:`GridRequest` is what a grid is (methods x datasets x ratios x seeds under one preset
and protocol, with overrides, tuned values or an ablation axis); :func:`plan_grid` expands it
into run configurations, every value checked before a run folder exists; :func:`run_grid`
executes a plan as an :class:`~debias_bench.session.execute.Execution` says and returns a
:class:`RunSummary` (the outcome of every run, the exit code ``bench run`` gives, the lines it
prints). Finished runs are skipped, interrupted ones resume from their checkpoints.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from debias_bench import paths
from debias_bench.analysis.ablations import ablation_grids, get_ablation
from debias_bench.analysis.tuned_checks import check_tuned_cells, tuned_values
from debias_bench.config.grid import Grid, expand, grid_size, large_grid_warning
from debias_bench.config.run_config import RunConfig
from debias_bench.config.terms import sweep_note
from debias_bench.launchers.preflight import check_seeds, unique
from debias_bench.launchers.run_one import MAX_ATTEMPTS, Outcome
from debias_bench.paths import check_path
from debias_bench.registry import DATASETS, METHODS
from debias_bench.reporting.format import short_note
from debias_bench.runs.states import SUCCESS, RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.execute import Execution, execute

Names = str | Sequence[str]


def names_of(value: Names) -> str | list[str]:
    """``"vanilla,lff"``, ``"all"`` or a list, as the registries resolve them."""
    return value if isinstance(value, str) else ",".join(value)


@dataclass(frozen=True)
class GridRequest:
    """A grid: ``methods`` and ``datasets`` (lists, comma lists or ``all``), ``ratios`` (None:
    each dataset's), ``seeds``, the ``preset`` and ``protocol``, ``epochs``, ``overrides``
    (``--set``), the dataset build's ``data_seed`` and ``data_options``, ``hparams`` (a
    ``bench tune`` result, ``tuned.yaml``) and ``ablation`` (an axis of the paper's)."""

    methods: Names = ("vanilla", "etf_debias")
    datasets: Names = ("cmnist",)
    ratios: Sequence[float] | None = None
    seeds: Sequence[int] = (0,)
    preset: str = "paper"
    protocol: str = "official"
    epochs: int | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    data_seed: int = 0
    data_options: Mapping[str, Any] = field(default_factory=dict)
    hparams: str | None = None
    ablation: str | None = None


@dataclass
class Plan:
    """The runs of a grid, and the notes and warnings to say before it starts."""

    configs: list[RunConfig]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def plan_grid(request: GridRequest) -> Plan:
    """Every run of ``request``, resolved and checked (a ConfigError before anything exists);
    duplicates (overlapping grids of an ablation) once."""
    tuned: dict[tuple[str, str, float], dict[str, Any]] = {}
    notes: list[str] = []
    if request.hparams:  # checked: types, duplicates, protocol (analysis.tuned_checks)
        tuned, notes = tuned_values(request.hparams, request.protocol, request.preset)
    grid = Grid(
        methods=list(dict.fromkeys(METHODS.resolve(names_of(request.methods)))),
        datasets=list(dict.fromkeys(DATASETS.resolve(names_of(request.datasets)))),
        ratios=unique(list(request.ratios)) if request.ratios else None,
        seeds=check_seeds([int(s) for s in request.seeds]),
        protocol=request.protocol,
        preset=request.preset,
        epochs=request.epochs,
        overrides=dict(request.overrides),
        data_options={"data_seed": request.data_seed, **request.data_options},
        tuned=tuned,
    )
    configs: list[RunConfig] = []
    grids = ablation_grids(get_ablation(request.ablation), grid) if request.ablation else [grid]
    for one in grids:
        more, more_notes = expand(one)
        configs += more
        notes += [n for n in more_notes if n not in notes]
    configs = list({c.run_id: c for c in configs}.values())  # grids of an ablation overlap
    if request.hparams:
        check_tuned_cells(
            tuned, [(c.method, c.dataset, float(c.ratio)) for c in configs], request.hparams
        )
    terms = sweep_note(configs)  # a method fed other inputs than the baselines, say
    large = large_grid_warning(configs)  # before the sweep makes a folder for each run
    return Plan(configs, [*notes, *([terms] if terms else [])], [large] if large else [])


@dataclass
class RunSummary:
    """How a grid ended: every run's outcome (``outcomes``: those the sweep reached, in grid
    order), how many it planned, the signal that stopped it (None) and the exit code ``bench
    run`` gives (0 only when every run is done or skipped by its method)."""

    store: Path
    planned: int
    outcomes: list[Outcome] = field(default_factory=list)
    signal: int | None = None
    stopped: str | None = None
    elapsed_s: float = 0.0

    def count(self, *states: RunState) -> int:
        return sum(o.state in states for o in self.outcomes)

    @property
    def done(self) -> int:
        return self.count(RunState.DONE)

    @property
    def skipped(self) -> int:
        return self.count(RunState.SKIPPED)

    @property
    def failed(self) -> int:
        return self.count(RunState.FAILED)

    @property
    def ran(self) -> int:
        """The runs this call trained (or resumed): the others were done already."""
        return sum(o.ran for o in self.outcomes)

    @property
    def run_ids(self) -> list[str]:
        return [o.config.run_id for o in self.outcomes]

    @property
    def detached(self) -> bool:
        """The runs go on without the sweep (SLURM with ``no_wait``)."""
        return bool(self.stopped and self.stopped.startswith("detached"))

    @property
    def exit_code(self) -> int:
        if self.detached:
            return 0 if self.signal is None else 128 + self.signal
        if self.signal is not None:
            return 128 + self.signal
        return 0 if not self.unfinished() else 1

    def unfinished(self) -> dict[str, int]:
        """``{"failed": 1, "not started": 2}``: the runs that are not done, by state."""
        states = Counter(str(o.state) for o in self.outcomes if o.state not in SUCCESS)
        if len(self.outcomes) < self.planned:
            states["not started"] = self.planned - len(self.outcomes)
        return dict(sorted(states.items()))

    def frame(self) -> pd.DataFrame:
        """One row per run: method, dataset, ratio, seed, state, the last model's test
        accuracy and bias-conflicting accuracy, training time, run id, note."""
        rows = []
        for o in self.outcomes:
            last = (o.result or {}).get("selections", {}).get("last", {}).get("test", {})
            rows.append(
                {
                    "method": o.config.method,
                    "dataset": o.config.dataset,
                    "ratio": o.config.ratio,
                    "seed": o.config.seed,
                    "state": str(o.state),
                    "accuracy": last.get("accuracy"),
                    "conflicting_accuracy": last.get("conflicting_accuracy"),
                    "train_time_s": (o.result or {}).get("train_time_s"),
                    "run_id": o.config.run_id,
                    "note": o.note,
                }
            )
        return pd.DataFrame(rows)

    def table(self) -> str:
        """The table ``bench run`` prints at the end: a row per run, except the runs not
        started (a stopped sweep of many runs), which are one line under it."""
        return summary(self.outcomes)

    def lines(self) -> list[str]:
        """What ``bench run`` says on stderr after the table: what ran, how long, where, and
        why the exit code is not 0."""
        said = [f"\n{ran_line(self.outcomes)}, in {self.elapsed_s:.0f} s; results in {self.store}"]
        if self.failed:
            said.append(f"see the errors with `bench status --out {self.store} --failed`")
        if self.detached:
            said.append(str(self.stopped).removeprefix("detached: "))
        elif self.signal is not None:
            said.append("interrupted: rerun the same command to resume")
        elif self.unfinished():
            text = ", ".join(f"{n} {state}" for state, n in self.unfinished().items())
            said.append(f"not every run is done ({text}): exit code 1")
        return said

    def __str__(self) -> str:
        return "\n".join([self.table(), *self.lines()]).strip()


def run_grid(
    request: GridRequest,
    how: Execution,
    store: str | Path,
    dry_run: bool = False,
    plan: Plan | None = None,
) -> RunSummary:
    """Plan (unless ``plan`` is given), say the notes on stderr, then execute; with
    ``dry_run``, list the runs (done or todo) on stdout and execute none."""
    check_path(Path(store), "--out")  # dry runs too: a path no file system takes
    plan = plan or plan_grid(request)
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in plan.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    runs = RunStore(Path(store))
    configs = plan.configs
    if dry_run:
        done = 0
        for c in configs:
            done += (finished := runs.run(c.run_id).is_done())
            print(f"{RunState.DONE.value if finished else 'todo'}  {c.run_id}")
        print(f"{grid_size(configs)}: {len(configs) - done:,} todo, {done:,} done", file=sys.stderr)
        return RunSummary(runs.root, len(configs))
    start = time.perf_counter()
    sweep, signum = execute(how, configs, runs, request.preset, request.protocol)
    return RunSummary(
        runs.root,
        len(configs),
        sweep.outcomes,
        signum,
        sweep.stopped,
        time.perf_counter() - start,
    )


def run(
    methods: Names,
    datasets: Names,
    ratios: Sequence[float] | None = None,
    seeds: Sequence[int] = (0,),
    *,
    store: str | Path = paths.DEFAULT_OUT,
    preset: str = "paper",
    protocol: str = "official",
    epochs: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    data_seed: int = 0,
    data_options: Mapping[str, Any] | None = None,
    hparams: str | None = None,
    ablation: str | None = None,
    device: str = "auto",
    launcher: str = "inline",
    raw_root: str | None = None,
    data_root: str | None = None,
    retry_failed: bool = False,
    max_attempts: int = MAX_ATTEMPTS,
    fail_fast: bool = False,
    timeout_s: float | str | None = None,
    grace_s: float = 30.0,
    track: Sequence[str] = (),
    no_wait: bool = False,
    **launcher_options: Any,
) -> RunSummary:
    """``bench run`` from Python: train the grid ``methods x datasets x ratios x seeds`` into
    the run store ``store`` and return its :class:`RunSummary` (``summary.exit_code`` is what
    ``bench run`` would exit with). The keywords are ``bench run``'s flags (``overrides``:
    ``--set``, ``{"lr": 1e-3}``; ``timeout_s``: seconds, or ``"30m"``); the launcher's own
    options are keywords too (``launcher="local", workers=2``). Raises the
    :class:`~debias_bench.errors.BenchError` ``bench run`` prints, before any run exists."""
    request = GridRequest(
        methods=methods,
        datasets=datasets,
        ratios=ratios,
        seeds=seeds,
        preset=preset,
        protocol=protocol,
        epochs=epochs,
        overrides=dict(overrides or {}),
        data_seed=data_seed,
        data_options=dict(data_options or {}),
        hparams=hparams,
        ablation=ablation,
    )
    how = Execution(
        launcher=launcher,
        launcher_options=launcher_options,
        device=device,
        raw_root=raw_root,
        data_root=data_root,
        retry_failed=retry_failed,
        max_attempts=max_attempts,
        fail_fast=fail_fast,
        timeout_s=timeout_s,
        grace_s=grace_s,
        track=tuple(track),
        no_wait=no_wait,
    )
    return run_grid(request, how, store)


def _row(o: Outcome) -> list[Any]:
    def fmt(value: float | None) -> str:
        return "" if value is None else f"{value:.2f}"

    sel = (o.result or {}).get("selections", {})
    last, best = sel.get("last", {}).get("test", {}), sel.get("best_valid", {}).get("test", {})
    return [
        o.config.method,
        o.config.dataset,
        f"{o.config.ratio:g}",
        o.config.seed,
        o.state,
        fmt(last.get("accuracy")),
        fmt(last.get("conflicting_accuracy")),
        fmt(best.get("accuracy")),
        fmt((o.result or {}).get("train_time_s")),
        short_note(o.note.replace(f"{o.config.run_id} ", "")),  # the row says which run
    ]


def not_started(outcomes: list[Outcome]) -> list[Outcome]:
    """The runs the sweep did not start (pending: it stopped first, or never got to them)."""
    return [o for o in outcomes if o.state is RunState.PENDING and not o.ran]


HEADERS = [
    "method",
    "dataset",
    "ratio",
    "seed",
    "state",
    "test acc",
    "conflicting",
    "test acc (best valid)",
    "time s",
    "note",
]


def summary(outcomes: list[Outcome]) -> str:
    """The final table: a row per run, except the runs not started (a stopped sweep of many
    runs), which are one line under it."""
    pending = not_started(outcomes)
    shown = [o for o in outcomes if not (o.state is RunState.PENDING and not o.ran)]
    text = tabulate([_row(o) for o in shown], headers=HEADERS, tablefmt="github") if shown else ""
    if pending:
        runs = "run" if len(pending) == 1 else "runs"
        line = f"{len(pending)} {runs} not started (pending): rerun the same command to start them"
        text = f"{text}\n{line}" if text else line
    return text


def ran_line(outcomes: list[Outcome]) -> str:
    """``5 ran, 0 failed, 1 interrupted``: what this sweep trained and how the runs that are
    not done ended (interrupted, dead: a rerun resumes them)."""
    failed = sum(o.state is RunState.FAILED for o in outcomes)
    text = f"{sum(o.ran for o in outcomes)} ran, {failed} failed"
    for state in (RunState.INTERRUPTED, RunState.DEAD):
        n = sum(o.state is state for o in outcomes)
        if n:
            text += f", {n} {state}"
    return text
