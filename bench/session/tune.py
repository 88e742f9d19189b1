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

This module runs a search (:func:`tune_grid`, :func:`tune`). The request and its plan of cells
are :mod:`debias_bench.session.tune_plan`; choosing the winners,
:mod:`debias_bench.session.tune_winners`; how a search ended (:class:`TuneSummary`),
:mod:`debias_bench.session.tune_summary`. Their names are importable from here too.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from debias_bench import paths
from debias_bench.analysis.tuning import TUNED_FILE, TunedFile, write_tuned
from debias_bench.launchers import Sweep
from debias_bench.paths import check_path
from debias_bench.runs.states import SUCCESS, RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.execute import Execution, execute
from debias_bench.session.run import Names
from debias_bench.session.tune_plan import MAX_TRIALS, Cell, TuneRequest, plan_cells
from debias_bench.session.tune_summary import TuneSummary, fmt
from debias_bench.session.tune_winners import (
    DIVERGED,
    choose_winners,
    score_cell,
    searched_values,
    tuned_cell,
)

__all__ = [
    "DIVERGED",
    "MAX_TRIALS",
    "Cell",
    "TuneRequest",
    "TuneSummary",
    "choose_winners",
    "fmt",
    "plan_cells",
    "score_cell",
    "searched_values",
    "tune",
    "tune_grid",
    "tuned_cell",
]


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
