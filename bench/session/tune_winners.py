"""Choosing each cell's winner of a search (``bench tune``): its trials' validation scores
read from the run store (never a test metric), the trial runs that did not end well, the values
the winner used and its reruns on the request's seeds.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from debias_bench.analysis.tuning import Scored, Trial, TunedCell, choose, valid_score
from debias_bench.config.grid import expand
from debias_bench.config.run_config import RunConfig
from debias_bench.errors import CorruptDataError
from debias_bench.launchers.run_one import Outcome
from debias_bench.runs.states import SUCCESS, RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.tune_plan import Cell, TuneRequest

#: ``status.json`` reason of a run whose loss became NaN or infinite (``states.FailReason``)
DIVERGED = "diverged"


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
