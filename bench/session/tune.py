"""``debias_bench.tune`` (and ``bench tune``): the same search budget for every method, chosen
on validation, rerun on new seeds.

Per method x dataset x ratio (a *cell*): ``trials`` configurations (trial 0 is the method's
own; the others are drawn from its ``search:`` space, :mod:`debias_bench.analysis.tuning`),
each trained on ``tune_seeds``; the trial with the best validation accuracy wins and is rerun on
``seeds``, which must differ from the tuning seeds (a winner's own search runs would carry the
luck that made it win). Trials and reruns are ordinary runs of the run store: they go through
the launchers of ``bench run``, are skipped when done, and a rerun of the same call resumes.
``STORE/tuned.yaml`` records the chosen values (``bench run --hparams``), every trial and the
reruns (``bench report``, ``bench analyze tune``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from debias_bench import paths
from debias_bench.analysis.tuning import (
    TUNE_SELECTIONS,
    TUNED_FILE,
    CellSearch,
    Scored,
    Trial,
    TunedCell,
    TunedFile,
    choose,
    search_space,
    valid_score,
    write_tuned,
)
from debias_bench.config.bounds import MAX_SEED, check_bound
from debias_bench.config.grid import Grid, expand
from debias_bench.config.run_config import RunConfig
from debias_bench.errors import ConfigError, CorruptDataError
from debias_bench.launchers import Sweep
from debias_bench.launchers.run_one import Outcome
from debias_bench.paths import check_path
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.states import SUCCESS, RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.execute import Execution, execute
from debias_bench.session.run import Names, names_of

#: the most trials per cell a request may ask for (a typo beyond)
MAX_TRIALS = 10_000

#: ``status.json`` reason of a run whose loss became NaN or infinite (``states.FailReason``)
DIVERGED = "diverged"


@dataclass(frozen=True)
class TuneRequest:
    """A search: the cells (``methods`` x ``datasets`` x ``ratios``, None: each dataset's), the
    ``trials`` per cell, the ``tune_seeds`` of every trial, the ``seeds`` of the winners'
    reruns, the validation ``selection`` that ranks trials, the ``sampler_seed`` of the draws,
    and the grid's terms (as :class:`~debias_bench.session.run.GridRequest`); the keys of
    ``overrides`` are fixed, not searched."""

    methods: Names = ("vanilla", "etf_debias")
    datasets: Names = ("cmnist",)
    ratios: Sequence[float] | None = None
    trials: int = 10
    tune_seeds: Sequence[int] = (0,)
    seeds: Sequence[int] = (1, 2, 3)
    selection: str = "best_valid"
    sampler_seed: int = 0
    preset: str = "paper"
    protocol: str = "official"
    epochs: int | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    data_seed: int = 0
    data_options: Mapping[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """The bounds ``bench tune``'s flags check, for values given from Python; seeds that
        are both tuning and rerun seeds."""
        check_bound("trials", self.trials, 1, MAX_TRIALS)
        check_bound("sampler_seed", self.sampler_seed, 0, MAX_SEED)
        if self.selection not in TUNE_SELECTIONS:
            raise ConfigError(
                f"selection={self.selection!r} is not one of {', '.join(TUNE_SELECTIONS)}",
                hint="trials are ranked on validation, never on a test metric",
            )
        if not self.tune_seeds or not self.seeds:
            raise ConfigError("--tune-seeds and --seeds need at least one seed each")
        shared = sorted(set(self.tune_seeds) & set(self.seeds))
        if shared:
            raise ConfigError(
                f"seed(s) {', '.join(map(str, shared))} are in both --tune-seeds and --seeds",
                hint="rerun the winners on seeds the search did not use, e.g. --seeds 1,2,3",
            )

    def grid(
        self, method: str, dataset: str, ratios: list[float] | None, seeds: Sequence[int],
        overrides: Mapping[str, Any],
    ) -> Grid:  # fmt: skip
        """The grid of one cell's runs on ``seeds`` with ``overrides``."""
        return Grid(
            methods=[method],
            datasets=[dataset],
            ratios=ratios,
            seeds=list(seeds),
            protocol=self.protocol,
            preset=self.preset,
            epochs=self.epochs,
            overrides=dict(overrides),
            data_options={"data_seed": self.data_seed, **self.data_options},
        )


@dataclass
class Cell:
    """One method x dataset x ratio: its search and the runs of each trial."""

    method: str
    dataset: str
    ratio: float
    search: CellSearch
    trials: list[tuple[Trial, list[RunConfig]]]

    @property
    def label(self) -> str:
        return f"{self.method} {self.dataset} r{self.ratio:g}"


def plan_cells(request: TuneRequest) -> tuple[list[Cell], list[str]]:
    """Every cell with its trials' run configurations, and notes on ratios left out."""
    fixed = dict(request.overrides)
    ratios = list(request.ratios) if request.ratios else None
    cells, notes = [], []
    for dataset in DATASETS.resolve(names_of(request.datasets)):
        for method in METHODS.resolve(names_of(request.methods)):
            space = {k: d for k, d in search_space(method, dataset).items() if k not in fixed}
            if not space:
                raise ConfigError(f"--set fixes every searched key of {method} on {dataset}")
            first = request.tune_seeds[:1]
            base, more = expand(request.grid(method, dataset, ratios, first, fixed))
            notes += [n for n in more if n not in notes]
            for ratio in [c.ratio for c in base]:
                search = CellSearch(method, dataset, ratio, space, request.sampler_seed)
                trials = []
                for trial in search.ask(request.trials):
                    overrides = fixed | trial.values
                    grid = request.grid(method, dataset, [ratio], request.tune_seeds, overrides)
                    trials.append((trial, expand(grid)[0]))
                cells.append(Cell(method, dataset, ratio, search, trials))
    return cells, notes


def _result(store: RunStore, run_id: str) -> dict[str, Any] | None:
    """A run's result; None when it has none or a corrupt one (that trial then cannot win;
    ``_trial_problems`` names it)."""
    try:
        return store.run(run_id).result()
    except CorruptDataError:
        return None


def score_cell(cell: Cell, store: RunStore, selection: str) -> list[Scored]:
    """Each trial's validation scores, read from the run store (never a test metric)."""
    scored = []
    for trial, configs in cell.trials:
        ids = [c.run_id for c in configs]
        scores = [valid_score(_result(store, i), selection) for i in ids]
        scored.append(Scored(trial, ids, scores))
    return scored


def searched_values(cell: Cell, trial: Trial) -> dict[str, Any]:
    """The values a trial's runs used for the searched keys (trial 0: the official ones)."""
    config = cell.trials[trial.index][1][0]
    return {key: config.hparams[key] for key in cell.search.space}


def tuned_cell(cell: Cell, scored: list[Scored], winner: Scored) -> TunedCell:
    return TunedCell(
        method=cell.method,
        dataset=cell.dataset,
        ratio=cell.ratio,
        hparams=searched_values(cell, winner.trial),
        trial=winner.trial.index,
        valid_accuracy=round(float(winner.mean or 0.0), 4),
        trials=[
            {
                "trial": s.trial.index,
                "hparams": searched_values(cell, s.trial),
                "valid_accuracy": None if s.mean is None else round(s.mean, 4),
                "runs": s.run_ids,
            }
            for s in scored
        ],
    )


def _trial_problems(cell: Cell, store: RunStore, outcomes: dict[str, Outcome]) -> list[str]:
    """Trial runs that did not end well, except those that diverged: a configuration whose
    loss blew up is a result of the search (it loses), not a failure of it."""
    problems = []
    for trial, configs in cell.trials:
        for config in configs:
            state = outcomes[config.run_id].state if config.run_id in outcomes else "not run"
            if state in SUCCESS:
                continue
            with contextlib.suppress(CorruptDataError):  # a torn status.json: a problem
                if store.run(config.run_id).status().get("reason") == DIVERGED:
                    print(
                        f"note: {cell.label} trial {trial.index} diverged (it loses)",
                        file=sys.stderr,
                    )
                    continue
            problems.append(f"{cell.label} trial {trial.index}: {config.run_id} {state}")
    return problems


def choose_winners(
    request: TuneRequest, cells: list[Cell], store: RunStore, outcomes: dict[str, Outcome]
) -> tuple[list[TunedCell], list[RunConfig], list[str]]:
    """Per cell, the winner on validation (its Optuna studies told every score) and its reruns
    on ``seeds``; and the problems that make ``bench tune`` exit 1."""
    chosen: list[TunedCell] = []
    finals: list[RunConfig] = []
    problems: list[str] = []
    for cell in cells:
        problems += _trial_problems(cell, store, outcomes)
        scored = score_cell(cell, store, request.selection)
        for s in scored:
            cell.search.tell(s.trial.index, s.mean)
        winner = choose(scored)
        if winner is None:
            states = [outcomes[r].state for s in scored for r in s.run_ids if r in outcomes]
            if states and all(state is RunState.SKIPPED for state in states):
                print(f"note: {cell.label}: skipped by the method", file=sys.stderr)
            else:
                problems.append(f"{cell.label}: no trial finished on every seed; no winner")
            continue
        tuned = tuned_cell(cell, scored, winner)
        overrides = dict(request.overrides) | tuned.hparams
        reruns = expand(request.grid(cell.method, cell.dataset, [cell.ratio], request.seeds,
                                     overrides))[0]  # fmt: skip
        tuned.runs = [c.run_id for c in reruns]
        chosen.append(tuned)
        finals += reruns
    return chosen, finals, problems


@dataclass
class TuneSummary:
    """How a search ended: the ``tuned`` file it wrote (None before the trials finished),
    every run's outcome by run id, the ``problems`` that make the exit code 1, and the signal
    or detachment that stopped a ``phase`` (``"trials"`` or ``"reruns"``)."""

    store: Path
    tuned: TunedFile | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    signal: int | None = None
    stopped: str | None = None
    phase: str = "trials"

    @property
    def detached(self) -> bool:
        return bool(self.stopped and self.stopped.startswith("detached"))

    @property
    def finished(self) -> bool:
        """Both phases ran to their end in this process."""
        return self.signal is None and not self.detached

    @property
    def exit_code(self) -> int:
        if self.signal is not None:
            return 128 + self.signal
        if self.detached:
            return 0
        return 1 if self.problems else 0

    def frame(self) -> pd.DataFrame:
        """One row per tuned cell: the winner, its validation accuracy, the chosen values, and
        the reruns' mean test accuracy under the search's selection."""
        rows = []
        for c in self.tuned.cells if self.tuned else []:
            tests = self._rerun_tests(c)
            rows.append(
                {
                    "method": c.method,
                    "dataset": c.dataset,
                    "ratio": c.ratio,
                    "winner": c.trial,
                    "valid_accuracy": c.valid_accuracy,
                    "hparams": dict(c.hparams),
                    "reruns_done": len(tests),
                    "reruns": len(c.runs),
                    "rerun_test_accuracy": sum(tests) / len(tests) if tests else None,
                }
            )
        return pd.DataFrame(rows)

    def _rerun_tests(self, cell: TunedCell) -> list[float]:
        selection = self.tuned.selection if self.tuned else "best_valid"
        done = [self.outcomes[r] for r in cell.runs if r in self.outcomes]
        return [(o.result or {})["selections"][selection]["test"]["accuracy"]
                for o in done if o.result]  # fmt: skip

    def table(self) -> str:
        """The table ``bench tune`` prints at the end, a row per cell."""
        if self.tuned is None:
            return ""
        rows = []
        for c in self.tuned.cells:
            tests = self._rerun_tests(c)
            rows.append(
                [
                    c.method,
                    c.dataset,
                    f"{c.ratio:g}",
                    f"{sum(t['valid_accuracy'] is not None for t in c.trials)}/{len(c.trials)}",
                    "official" if c.trial == 0 else c.trial,
                    fmt(c.valid_accuracy),
                    ", ".join(f"{k}={v}" for k, v in c.hparams.items()),
                    f"{len(tests)}/{len(c.runs)}",
                    fmt(sum(tests) / len(tests) if tests else None),
                ]
            )
        headers = ["method", "dataset", "ratio", "trials done", "winner",
                   f"valid acc ({self.tuned.selection})", "chosen values", "reruns done",
                   "rerun test acc (mean)"]  # fmt: skip
        return tabulate(rows, headers=headers, tablefmt="github")

    def lines(self) -> list[str]:
        """What ``bench tune`` says on stderr after the table (or instead of it, when a phase
        did not finish here)."""
        if self.detached:
            return [str(self.stopped).removeprefix("detached: "),
                    f"rerun the same `bench tune` once the {self.phase} have finished"]  # fmt: skip
        if self.signal is not None:
            return ["interrupted: rerun the same command to resume"]
        selection = self.tuned.selection if self.tuned else ""
        said = [f"\nwinners chosen on validation accuracy ({selection} checkpoint); "
                f"report: `bench report --out {self.store}`"]  # fmt: skip
        said += [f"problem: {problem}" for problem in self.problems]
        if self.problems:
            said.append(f"see `bench status --out {self.store} --failed`")
        return said


def fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _list_trials(cells: list[Cell], store: RunStore) -> None:
    """A dry run: every trial's runs, each done or to do, on stdout."""
    for cell in cells:
        for trial, configs in cell.trials:
            for c in configs:
                state = RunState.DONE.value if store.run(c.run_id).is_done() else "todo"
                print(f"{state}  {cell.label} trial {trial.index}: {trial.values}  {c.run_id}")


def _phase(summary: TuneSummary, sweep: Sweep, signum: int | None, phase: str) -> bool:
    """Record a phase's outcomes; False when it did not finish in this process (a signal, or
    runs detached from it)."""
    summary.outcomes.update({o.config.run_id: o for o in sweep.outcomes})
    summary.phase, summary.signal, summary.stopped = phase, signum, sweep.stopped
    return summary.finished


def tune_grid(
    request: TuneRequest, how: Execution, store: str | Path, dry_run: bool = False
) -> TuneSummary:
    """Plan the search (notes on stderr), run the trials, choose each cell's winner on
    validation, write ``tuned.yaml``, rerun the winners; with ``dry_run``, list the trials'
    runs on stdout and run none."""
    request.check()
    check_path(Path(store), "--out")
    cells, notes = plan_cells(request)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    runs = RunStore(Path(store))
    summary = TuneSummary(runs.root)
    if dry_run:
        _list_trials(cells, runs)
        return summary
    trial_configs = list(
        {c.run_id: c for cell in cells for _, cs in cell.trials for c in cs}.values()
    )
    print(
        f"search: {len(cells)} cell(s) x {request.trials} trial(s) x "
        f"{len(request.tune_seeds)} seed(s)",
        file=sys.stderr,
    )
    sweep, signum = execute(how, trial_configs, runs, request.preset, request.protocol)
    if not _phase(summary, sweep, signum, "trials"):
        return summary
    chosen, finals, summary.problems = choose_winners(request, cells, runs, summary.outcomes)
    summary.tuned = TunedFile(
        protocol=request.protocol,
        preset=request.preset,
        selection=request.selection,
        num_trials=request.trials,
        tune_seeds=list(request.tune_seeds),
        seeds=list(request.seeds),
        sampler_seed=request.sampler_seed,
        fixed=dict(request.overrides),
        cells=chosen,
    )
    path = runs.root / TUNED_FILE
    write_tuned(path, summary.tuned)
    print(f"wrote {path} ({len(chosen)} cell(s))", file=sys.stderr)
    if finals:
        seeds = ",".join(map(str, request.seeds))
        print(f"reruns of the winners on seeds {seeds}", file=sys.stderr)
        sweep, signum = execute(how, finals, runs, request.preset, request.protocol)
        if not _phase(summary, sweep, signum, "reruns"):
            return summary
        summary.problems += [f"rerun {o.config.run_id} {o.state}" for o in sweep.outcomes
                             if o.state not in SUCCESS]  # fmt: skip
    return summary


def tune(
    methods: Names,
    datasets: Names,
    ratios: Sequence[float] | None = None,
    *,
    store: str | Path = paths.DEFAULT_OUT,
    trials: int = 10,
    tune_seeds: Sequence[int] = (0,),
    seeds: Sequence[int] = (1, 2, 3),
    selection: str = "best_valid",
    sampler_seed: int = 0,
    preset: str = "paper",
    protocol: str = "official",
    epochs: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    data_seed: int = 0,
    data_options: Mapping[str, Any] | None = None,
    device: str = "auto",
    launcher: str = "inline",
    **launcher_options: Any,
) -> TuneSummary:
    """``bench tune`` from Python: search each cell, write ``STORE/tuned.yaml``, rerun the
    winners, and return the :class:`TuneSummary` (``summary.frame()``: a row per cell;
    ``summary.exit_code``: what ``bench tune`` exits with). ``overrides`` are fixed values
    (``--set``); the launcher's options are keywords (``launcher="local", workers=2``).
    Raises the :class:`~debias_bench.errors.BenchError` ``bench tune`` prints."""
    request = TuneRequest(
        methods=methods,
        datasets=datasets,
        ratios=ratios,
        trials=trials,
        tune_seeds=tuple(tune_seeds),
        seeds=tuple(seeds),
        selection=selection,
        sampler_seed=sampler_seed,
        preset=preset,
        protocol=protocol,
        epochs=epochs,
        overrides=dict(overrides or {}),
        data_seed=data_seed,
        data_options=dict(data_options or {}),
    )
    how = Execution(launcher=launcher, launcher_options=launcher_options, device=device)
    return tune_grid(request, how, store)
