"""`bench tune`: the same search budget for every method, chosen on validation, rerun on new seeds.

Per method x dataset x ratio (a *cell*): ``--trials N`` configurations (trial 0 is the method's
own; the others are drawn from its ``search:`` space, see :mod:`debias_bench.analysis.tuning`),
each trained
on ``--tune-seeds``; the trial with the best validation accuracy wins, and is rerun on
``--seeds``, which must differ from the tuning seeds (a winner's own search runs would carry the
luck that made it win). Trials and reruns are ordinary runs of the run store ``--out``: they go
through the launchers of ``bench run``, are skipped when done, and a rerun of the same command
resumes. ``--out/tuned.yaml`` records the chosen values (``bench run --hparams``), every trial,
and the reruns (``bench report``, ``bench analyze tune``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

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
from debias_bench.config.bounds import MAX_SEED
from debias_bench.config.grid import Grid, expand
from debias_bench.config.run_config import RunConfig, parse_overrides
from debias_bench.errors import ConfigError, CorruptDataError
from debias_bench.launchers import Sweep
from debias_bench.launchers.run_one import Outcome
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.states import SUCCESS, RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.execute import execute

from .common import floats, fmt, ints
from .flags import config_args, execution_args, execution_of, number

#: the most trials per cell a command line may ask for (a typo beyond)
MAX_TRIALS = 10_000

#: ``status.json`` reason of a run whose loss became NaN or infinite (``states.FailReason``)
DIVERGED = "diverged"


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


def _grid(
    args: argparse.Namespace,
    method: str,
    dataset: str,
    ratios: list[float] | None,
    seeds: list[int],
    overrides: dict[str, Any],
) -> Grid:
    return Grid(
        methods=[method],
        datasets=[dataset],
        ratios=ratios,
        seeds=seeds,
        protocol=args.protocol,
        preset=args.preset,
        epochs=args.epochs,
        overrides=overrides,
        data_options={"data_seed": args.data_seed, **parse_overrides(args.data_option)},
    )


def plan_cells(args: argparse.Namespace) -> tuple[list[Cell], list[str]]:
    """Every cell with its trials' run configurations, and notes on ratios left out. The
    values of ``--set`` are fixed: those keys are not searched."""
    fixed = parse_overrides(args.set)
    tune_seeds = ints(args.tune_seeds)
    ratios = floats(args.ratios) if args.ratios else None
    cells, notes = [], []
    for dataset in DATASETS.resolve(args.datasets):
        for method in METHODS.resolve(args.methods):
            space = {k: d for k, d in search_space(method, dataset).items() if k not in fixed}
            if not space:
                raise ConfigError(f"--set fixes every searched key of {method} on {dataset}")
            base, more = expand(_grid(args, method, dataset, ratios, tune_seeds[:1], fixed))
            notes += [n for n in more if n not in notes]
            for ratio in [c.ratio for c in base]:
                search = CellSearch(method, dataset, ratio, space, args.sampler_seed)
                trials = []
                for trial in search.ask(args.trials):
                    grid = _grid(args, method, dataset, [ratio], tune_seeds, fixed | trial.values)
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


def _check_seeds(tune_seeds: list[int], seeds: list[int]) -> None:
    if not tune_seeds or not seeds:
        raise ConfigError("--tune-seeds and --seeds need at least one seed each")
    shared = sorted(set(tune_seeds) & set(seeds))
    if shared:
        raise ConfigError(
            f"seed(s) {', '.join(map(str, shared))} are in both --tune-seeds and --seeds",
            hint="rerun the winners on seeds the search did not use, e.g. --seeds 1,2,3",
        )


def _stopped(sweep: Sweep, signum: int | None, phase: str) -> int | None:
    """The exit code when a phase did not finish in this process (signal or detached)."""
    if sweep.stopped and sweep.stopped.startswith("detached"):
        print(sweep.stopped.removeprefix("detached: "), file=sys.stderr)
        print(f"rerun the same `bench tune` once the {phase} have finished", file=sys.stderr)
        return 0 if signum is None else 128 + signum
    if signum is not None:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return 128 + signum
    return None


def summary(tuned: TunedFile, outcomes: dict[str, Outcome], selection: str) -> str:
    rows = []
    for c in tuned.cells:
        done = [outcomes[r] for r in c.runs if r in outcomes and outcomes[r].result]
        tests = [(o.result or {})["selections"][selection]["test"]["accuracy"] for o in done]
        rows.append(
            [
                c.method,
                c.dataset,
                f"{c.ratio:g}",
                f"{sum(t['valid_accuracy'] is not None for t in c.trials)}/{len(c.trials)}",
                "official" if c.trial == 0 else c.trial,
                fmt(c.valid_accuracy),
                ", ".join(f"{k}={v}" for k, v in c.hparams.items()),
                f"{len(done)}/{len(c.runs)}",
                fmt(sum(tests) / len(tests) if tests else None),
            ]
        )
    headers = [
        "method",
        "dataset",
        "ratio",
        "trials done",
        "winner",
        f"valid acc ({selection})",
        "chosen values",
        "reruns done",
        "rerun test acc (mean)",
    ]
    return tabulate(rows, headers=headers, tablefmt="github")


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
    args: argparse.Namespace, cells: list[Cell], store: RunStore, outcomes: dict[str, Outcome]
) -> tuple[list[TunedCell], list[RunConfig], list[str]]:
    """Per cell, the winner on validation (its Optuna studies told every score) and its reruns
    on ``--seeds``; and the problems that make ``bench tune`` exit 1."""
    chosen: list[TunedCell] = []
    finals: list[RunConfig] = []
    problems: list[str] = []
    fixed = parse_overrides(args.set)
    for cell in cells:
        problems += _trial_problems(cell, store, outcomes)
        scored = score_cell(cell, store, args.selection)
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
        grid = _grid(
            args, cell.method, cell.dataset, [cell.ratio], ints(args.seeds), fixed | tuned.hparams
        )
        reruns = expand(grid)[0]
        tuned.runs = [c.run_id for c in reruns]
        chosen.append(tuned)
        finals += reruns
    return chosen, finals, problems


def _print_trials(cells: list[Cell], store: RunStore) -> None:
    """``--dry-run``: every trial's runs, each done or to do."""
    for cell in cells:
        for trial, configs in cell.trials:
            for c in configs:
                state = RunState.DONE.value if store.run(c.run_id).is_done() else "todo"
                print(f"{state}  {cell.label} trial {trial.index}: {trial.values}  {c.run_id}")


def cmd_tune(args: argparse.Namespace) -> int:
    tune_seeds, seeds = ints(args.tune_seeds), ints(args.seeds)
    _check_seeds(tune_seeds, seeds)
    cells, notes = plan_cells(args)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    store = RunStore(Path(args.out))
    if args.dry_run:
        _print_trials(cells, store)
        return 0
    trial_configs = list(
        {c.run_id: c for cell in cells for _, cs in cell.trials for c in cs}.values()
    )
    print(
        f"search: {len(cells)} cell(s) x {args.trials} trial(s) x {len(tune_seeds)} seed(s)",
        file=sys.stderr,
    )
    sweep, signum = execute(execution_of(args), trial_configs, store, args.preset, args.protocol)
    code = _stopped(sweep, signum, "trials")
    if code is not None:
        return code
    outcomes = {o.config.run_id: o for o in sweep.outcomes}
    chosen, finals, problems = choose_winners(args, cells, store, outcomes)
    tuned_file = TunedFile(
        protocol=args.protocol,
        preset=args.preset,
        selection=args.selection,
        num_trials=args.trials,
        tune_seeds=tune_seeds,
        seeds=seeds,
        sampler_seed=args.sampler_seed,
        fixed=parse_overrides(args.set),
        cells=chosen,
    )
    path = Path(args.out) / TUNED_FILE
    write_tuned(path, tuned_file)
    print(f"wrote {path} ({len(chosen)} cell(s))", file=sys.stderr)
    if finals:
        print(f"reruns of the winners on seeds {args.seeds}", file=sys.stderr)
        sweep, signum = execute(execution_of(args), finals, store, args.preset, args.protocol)
        code = _stopped(sweep, signum, "reruns")
        if code is not None:
            return code
        outcomes.update({o.config.run_id: o for o in sweep.outcomes})
        problems += [f"rerun {o.config.run_id} {o.state}" for o in sweep.outcomes
                     if o.state not in SUCCESS]  # fmt: skip
    print(summary(tuned_file, outcomes, args.selection))
    print(
        f"\nwinners chosen on validation accuracy ({args.selection} checkpoint); "
        f"report: `bench report --out {args.out}`",
        file=sys.stderr,
    )
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    if problems:
        print(f"see `bench status --out {args.out} --failed`", file=sys.stderr)
    return 1 if problems else 0


def add(sub: argparse._SubParsersAction) -> None:
    tune = sub.add_parser(
        "tune",
        help="fair tuning: a seeded random search per method, chosen on validation, rerun",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    tune.add_argument("--methods", default="vanilla,etf_debias", help="comma list or 'all'")
    tune.add_argument("--datasets", default="cmnist", help="comma list or 'all'")
    tune.add_argument("--ratios", help="bias-conflicting %% (default: each dataset's ratios)")
    tune.add_argument(
        "--trials",
        type=number("int", 1, MAX_TRIALS),
        default=10,
        help="configurations per cell, the official one first",
    )
    tune.add_argument("--tune-seeds", default="0", help="training seeds of every trial")
    tune.add_argument(
        "--seeds", default="1,2,3", help="seeds of the winners' reruns (not the tuning seeds)"
    )
    tune.add_argument(
        "--selection",
        default="best_valid",
        choices=TUNE_SELECTIONS,
        help="checkpoint whose validation accuracy ranks the trials (never a test metric)",
    )
    tune.add_argument(
        "--sampler-seed",
        type=number("int", 0, MAX_SEED),
        default=0,
        help="seed of the hyperparameter draws",
    )
    config_args(tune)
    tune.add_argument("--out", required=True, help="run store; tuned.yaml is written there")
    tune.add_argument("--dry-run", action="store_true", help="list the trials and exit")
    execution_args(tune)
    tune.set_defaults(func=cmd_tune)
