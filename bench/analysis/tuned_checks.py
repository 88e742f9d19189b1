"""Checks of a ``tuned.yaml`` (:mod:`debias_bench.analysis.tuning`), before ``bench run
--hparams`` layers its values over a grid and before ``bench report`` shows it: every field of
the right type, no cell given twice, tuned under the run's protocol, a value for every cell of
the grid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from debias_bench.analysis.tuning import TunedFile, read_tuned
from debias_bench.errors import ConfigError

# ``read_tuned`` (debias_bench.analysis.tuning) refuses a file that is not a tuned file at all;
# these checks refuse one whose fields have the wrong types or that does not fit the run it is used
# for, so `bench run --hparams` and `bench report` fail with one error (exit 2), never a
# traceback and never values silently left out.

Cell3 = tuple[str, str, float]


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _mapping(value: Any, where: str, problems: list[str]) -> None:
    if not isinstance(value, dict):
        problems.append(f"{where} is {_kind(value)}, not a mapping of key: value")
    elif not all(isinstance(k, str) for k in value):
        problems.append(f"{where} has keys that are not names: {sorted(map(str, value))}")


def _ints(value: Any, where: str, problems: list[str]) -> None:
    if not isinstance(value, list) or not all(_is_int(v) and v >= 0 for v in value):
        problems.append(f"{where} is {value!r}, not a list of seeds (integers >= 0)")


def tuned_problems(tuned: TunedFile) -> list[str]:
    """Every field of wrong type or value in ``tuned``, and every cell (method x dataset x
    ratio) given twice; empty when it is sound."""
    problems: list[str] = []
    for name in ("protocol", "preset", "selection"):
        if not isinstance(getattr(tuned, name), str):
            problems.append(f"{name} is {_kind(getattr(tuned, name))}, not a name")
    if not _is_int(tuned.num_trials) or tuned.num_trials < 1:
        problems.append(f"num_trials is {tuned.num_trials!r}, not a whole number >= 1")
    _ints(tuned.tune_seeds, "tune_seeds", problems)
    _ints(tuned.seeds, "seeds", problems)
    _mapping(tuned.fixed, "fixed", problems)
    if not isinstance(tuned.cells, list):
        return [*problems, f"cells is {_kind(tuned.cells)}, not a list of cells"]
    seen: dict[Cell3, int] = {}
    for i, cell in enumerate(tuned.cells):
        where = f"cells[{i}]"
        if not isinstance(cell.method, str) or not isinstance(cell.dataset, str):
            problems.append(f"{where}: method and dataset must be names")
            continue
        where = f"cells[{i}] ({cell.method} {cell.dataset} r{cell.ratio:g})"
        if not math.isfinite(cell.ratio) or cell.ratio <= 0:
            problems.append(f"{where}: ratio {cell.ratio!r} is not a ratio (%) > 0")
        _mapping(cell.hparams, f"{where}: hparams", problems)
        if not _is_int(cell.trial) or cell.trial < 0:
            problems.append(f"{where}: trial is {cell.trial!r}, not a whole number >= 0")
        if not _is_number(cell.valid_accuracy) or not math.isfinite(cell.valid_accuracy):
            problems.append(f"{where}: valid_accuracy is {cell.valid_accuracy!r}, not a number")
        if not isinstance(cell.runs, list) or not all(isinstance(r, str) for r in cell.runs):
            problems.append(f"{where}: runs is {cell.runs!r}, not a list of run ids")
        problems += _trial_problems(cell.trials, where)
        key = (cell.method, cell.dataset, float(cell.ratio))
        if key in seen:
            problems.append(f"{where} repeats cells[{seen[key]}]: one cell, two sets of values")
        seen.setdefault(key, i)
    return problems


def _trial_problems(trials: Any, where: str) -> list[str]:
    if not isinstance(trials, list):
        return [f"{where}: trials is {_kind(trials)}, not a list"]
    problems: list[str] = []
    for j, trial in enumerate(trials):
        here = f"{where}: trials[{j}]"
        if not isinstance(trial, dict):
            problems.append(f"{here} is {_kind(trial)}, not a mapping")
            continue
        if not _is_int(trial.get("trial")):
            problems.append(f"{here}: trial is {trial.get('trial')!r}, not a whole number")
        _mapping(trial.get("hparams"), f"{here}: hparams", problems)
        runs = trial.get("runs")
        if not isinstance(runs, list) or not all(isinstance(r, str) for r in runs):
            problems.append(f"{here}: runs is {runs!r}, not a list of run ids")
        accuracy = trial.get("valid_accuracy")
        if accuracy is not None and not _is_number(accuracy):
            problems.append(f"{here}: valid_accuracy is {accuracy!r}, not a number or null")
    return problems


def read_checked(path: Path | str) -> TunedFile:
    """``tuned.yaml`` read (``read_tuned``) and checked (:func:`tuned_problems`); ConfigError
    listing the problems otherwise."""
    tuned = read_tuned(path)
    problems = tuned_problems(tuned)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ConfigError(
            f"{path} is not a valid tuned file: " + "; ".join(problems[:5]) + more,
            hint="rerun `bench tune` to write it again (or fix those fields by hand)",
        )
    return tuned


def tuned_values(
    path: Path | str, protocol: str, preset: str
) -> tuple[dict[Cell3, dict[str, Any]], list[str]]:
    """The values ``bench run --hparams PATH`` layers over each cell (``TunedFile.values``),
    and notes. The file must have been tuned under the run's ``--protocol`` (another protocol
    is another recipe: its values do not carry over); another ``--preset`` is a note."""
    tuned = read_checked(path)
    if tuned.protocol != protocol:
        raise ConfigError(
            f"{path} was tuned under protocol {tuned.protocol!r}, not --protocol {protocol!r}",
            hint=f"run with --protocol {tuned.protocol}, or tune under {protocol} "
            f"(`bench tune --protocol {protocol} ...`)",
        )
    notes = []
    if tuned.preset != preset:
        notes.append(
            f"{path} was tuned under preset {tuned.preset!r}; this run uses --preset {preset!r} "
            "(the chosen values are used as they are)"
        )
    return tuned.values(), notes


def check_tuned_cells(
    tuned: dict[Cell3, dict[str, Any]], cells: Iterable[Cell3], path: Path | str
) -> None:
    """Every cell of the grid has values in the tuned file: a cell without would silently run
    its official configuration under ``--hparams``, so it is an error naming those cells."""
    missing = [c for c in dict.fromkeys(cells) if c not in tuned]
    if not missing:
        return
    shown = ", ".join(f"{m} {d} r{r:g}" for m, d, r in missing[:6])
    has = ", ".join(f"{m} {d} r{r:g}" for m, d, r in list(tuned)[:6]) or "none"
    raise ConfigError(
        f"{path} has no tuned values for {len(missing)} cell(s) of this grid: {shown}"
        + (", ..." if len(missing) > 6 else "")
        + f" (it has: {has})",
        hint="narrow --methods/--datasets/--ratios to the tuned cells, tune the others "
        "(`bench tune`), or run them without --hparams",
    )
