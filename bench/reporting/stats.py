"""Seed statistics, the reasons for empty cells, and the best-in-row / gain marks."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from debias_bench.reporting.model import Cell
from debias_bench.runs.states import RunState

#: the spread printed after ``±``: the sample standard deviation over seeds
DDOF = 1
STATISTIC = f"mean ± sample standard deviation (ddof={DDOF}) over seeds"

_UNFINISHED = frozenset({RunState.PENDING, RunState.INTERRUPTED, RunState.DEAD})
#: finished runs whose results hold no value for the selection or metric asked for (a run
#: without an in-distribution validation split has no ``best_valid_iid``: its ``result.json``
#: says why under ``valid_iid``)
NOT_RECORDED = "not recorded"


def seed_stats(values: Iterable[float]) -> tuple[float | None, float | None, int]:
    """(mean, std with ``DDOF``, n) of the non-missing values; std is None for n < 2."""
    series = pd.Series(list(values), dtype=float).dropna()
    n = len(series)
    if n == 0:
        return None, None, 0
    std = float(series.std(ddof=DDOF)) if n > DDOF else None
    return float(series.mean()), std, n


def missing_reason(states: Iterable[str]) -> str:
    """Why a cell has no finished run, from the states of the runs recorded for it."""
    states = set(states)
    if not states:
        return "not run"
    if RunState.RUNNING in states:
        return RunState.RUNNING.value
    if states & _UNFINISHED:
        return "unfinished"
    for named in (RunState.CORRUPT, RunState.FAILED):
        if named in states:
            return named.value
    if states == {RunState.SKIPPED}:
        return RunState.SKIPPED.value
    if RunState.DONE in states and states <= {RunState.DONE, RunState.SKIPPED}:
        return NOT_RECORDED
    return "unfinished"


def value_cell(
    values: Iterable[float], states: Iterable[str], expected_n: int = 0, digits: int = 2
) -> Cell:
    mean, std, n = seed_stats(values)
    if mean is None:
        return Cell(missing=missing_reason(states), digits=digits)
    return Cell(mean=mean, std=std, n=n, expected_n=expected_n, digits=digits)


def rounded(cell: Cell) -> float:
    """The mean as printed: bold marks and gains compare what the reader sees."""
    assert cell.mean is not None
    return round(cell.mean, cell.digits)


def mark_best(cells: dict[str, Cell], ours: str | None, gain: bool = True) -> None:
    """Bold the best printed mean; give ``ours`` its gain or loss against the best other one.

    Both use the printed (rounded) means, so a bracket always equals the difference of the two
    numbers printed beside it, as in the paper.
    """
    filled = {k: c for k, c in cells.items() if c.has_value}
    if not filled:
        return
    best = max(rounded(c) for c in filled.values())
    for cell in filled.values():
        cell.bold = rounded(cell) == best
    others = [rounded(c) for k, c in filled.items() if k != ours]
    if gain and ours in filled and others:
        cell = filled[ours]
        cell.delta = round(rounded(cell) - max(others), cell.digits)


def difference(value: float | None, reference: float | None) -> float | None:
    """``value - reference``, or None when either is missing."""
    if value is None or reference is None:
        return None
    return value - reference


def combined_std(*stds: float | None) -> float:
    """sqrt of the sum of squares; a missing std (a single seed) counts as 0."""
    return math.sqrt(sum((s or 0.0) ** 2 for s in stds))


def diff_cell(ours: Cell, paper: Cell) -> Cell:
    """ours - paper, flagged when the difference exceeds the combined std."""
    if not (ours.has_value and paper.has_value):
        return Cell(missing="")  # nothing to compare; the rows above say why
    assert ours.mean is not None and paper.mean is not None
    diff = ours.mean - paper.mean
    return Cell(
        mean=diff,
        signed=True,
        flag=abs(diff) > combined_std(ours.std, paper.std) + 1e-9,
        digits=ours.digits,
    )
