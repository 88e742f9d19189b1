"""Seed statistics, the reasons for empty cells, the best-in-row / gain marks, and (with
``--interval``) each cell's interval and whether it can be told from its row's best."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from debias_bench.reporting.grouping import FINGERPRINT
from debias_bench.reporting.intervals import IntervalSpec
from debias_bench.reporting.model import Cell
from debias_bench.reporting.significance import PAIRED, Difference, Sample, corrected
from debias_bench.reporting.significance import difference as sample_difference
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
    if RunState.STALE in states:  # trained by other code: the same `bench run` retrains it
        return RunState.STALE.value
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


# ------------------------------------------------------------------------- significance marks
def samples_by(done: pd.DataFrame, keys: list[str], metric: str) -> dict[Hashable, Sample]:
    """Per key of ``keys`` (a tuple, or the value for one key), the finished ``metric`` by seed
    and the data builds of those runs (``done``: one row per run, as :func:`finished` gives)."""
    found: dict[Hashable, Sample] = {}
    for key, group in done.dropna(subset=[metric]).groupby(keys):
        values = {int(seed): float(v) for seed, v in zip(group["seed"], group[metric], strict=True)}
        builds = group[FINGERPRINT].dropna() if FINGERPRINT in group else pd.Series([], dtype=str)
        found[key[0] if len(keys) == 1 else key] = Sample(values, frozenset(map(str, builds)))
    return found


def set_interval(cell: Cell, sample: Sample | None, spec: IntervalSpec) -> None:
    """The interval of the cell's mean over its seeds (none for a single seed)."""
    bounds = spec.of(list(sample.values.values())) if sample is not None else None
    if cell.has_value and bounds is not None:
        cell.low, cell.high = bounds


@dataclass(frozen=True)
class TieTests:
    """The tests behind a table's ties: how many paired and Welch, the level."""

    paired: int
    welch: int
    alpha: float

    @property
    def total(self) -> int:
        return self.paired + self.welch


def mark_ties(
    rows: Sequence[dict[str, Cell]], samples: Sequence[dict[str, Sample]], alpha: float
) -> TieTests:
    """Test every other filled cell of each row against the row's best (bold, from
    :func:`mark_best`; of several equal printed means, the highest mean), Holm over all the
    rows' tests, and mark ``tie`` where the corrected p is ``>= alpha``. A cell or best with
    fewer than 2 seeds cannot be tested: it is a tie (nothing tells them apart)."""
    tested: list[tuple[Cell, Difference]] = []
    for cells, sample in zip(rows, samples, strict=True):
        bold = [k for k, c in cells.items() if c.bold and k in sample]
        if not bold:
            continue
        best = max(bold, key=lambda k: sample[k].mean)
        for key, cell in cells.items():
            if not cell.has_value or cell.bold:
                continue
            found = sample_difference(sample[best], sample[key]) if key in sample else None
            if found is None:
                cell.tie = True
            else:
                tested.append((cell, found))
    adjusted = corrected([d for _, d in tested])
    for (cell, _), found in zip(tested, adjusted, strict=True):
        cell.p = found.p_adjusted
        cell.tie = not found.holds(alpha)
    paired = sum(d.test == PAIRED for _, d in tested)
    return TieTests(paired, len(tested) - paired, alpha)
