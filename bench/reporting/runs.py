"""The run records as the table builders read them (pure functions on the tidy DataFrame).

One row per run whatever its state, the finished results of a selection, (protocol, preset)
blocks that are never averaged together, per-cell values, states and seed counts, and the notes
on the runs a table leaves out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from debias_bench.reporting.grouping import check_cells
from debias_bench.reporting.model import Cell
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.stats import seed_stats, value_cell
from debias_bench.runs.states import RunState


def run_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per run (its state and cost), whatever its state."""
    runs = records.drop_duplicates("run_id").copy()
    runs["protocol"] = runs["protocol"].fillna("?")
    runs["preset"] = runs["preset"].fillna("?")
    return runs


def finished(records: pd.DataFrame, opts: ReportOptions) -> pd.DataFrame:
    """The records of done runs under the options' model selection and split."""
    keep = (
        (records["state"] == RunState.DONE)
        & (records["selection"] == opts.selection)
        & (records["split"] == opts.split)
    )
    return records[keep]


def blocks(runs: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """(protocol, preset, runs) groups: numbers from different protocols never mix."""
    for (protocol, preset), block in runs.groupby(["protocol", "preset"], sort=True):
        yield str(protocol), str(preset), block


def checked_blocks(runs: pd.DataFrame, keys: list[str]) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """:func:`blocks`, each checked to hold one configuration per cell of ``keys``, so that a
    cell averages seeds only (:func:`~debias_bench.reporting.grouping.check_cells`)."""
    for protocol, preset, block in blocks(runs):
        check_cells(block, keys, block_where(protocol, preset))
        yield protocol, preset, block


def _groups(frame: pd.DataFrame, keys: list[str]) -> Iterator[tuple[Any, pd.DataFrame]]:
    """groupby that yields a plain key (not a 1-tuple) for a single key column."""
    for key, group in frame.groupby(keys):
        yield (key[0] if len(keys) == 1 else key), group


def values_by(frame: pd.DataFrame, keys: list[str], column: str) -> dict[Any, list[float]]:
    return {k: list(g[column]) for k, g in _groups(frame, keys)}


def states_by(runs: pd.DataFrame, keys: list[str]) -> dict[Any, list[str]]:
    return {k: list(g["state"]) for k, g in _groups(runs, keys)}


def seeds_by(runs: pd.DataFrame, keys: list[str]) -> dict[Any, int]:
    return {k: int(g["seed"].nunique()) for k, g in _groups(runs, keys)}


@dataclass(frozen=True)
class SeedCells:
    """A block's runs grouped by the same keys: per key, the metric's finished values, the runs'
    states and how many seeds they have. A cell expects the most seeds any key finished
    (``max_n``), so one that finished fewer shows it."""

    values: dict[Any, list[float]]
    states: dict[Any, list[str]]
    seeds: dict[Any, int]
    max_n: int
    digits: int

    @classmethod
    def of(
        cls, runs: pd.DataFrame, done: pd.DataFrame, keys: list[str], opts: ReportOptions
    ) -> SeedCells:
        """``runs`` (any state) grouped by ``keys``, with the values of ``opts.metric`` in the
        finished records ``done`` (those of other runs are left out)."""
        values = values_by(done[done["run_id"].isin(runs["run_id"])], keys, opts.metric)
        max_n = max([seed_stats(v)[2] for v in values.values()] or [0])
        return cls(values, states_by(runs, keys), seeds_by(runs, keys), max_n, opts.digits)

    def cell(self, key: Any, values: list[float] | None = None) -> Cell:
        """The cell of ``key``: the mean over seeds of ``values`` (by default its metric's), or
        why it is missing."""
        values = self.values.get(key, []) if values is None else values
        expected = max(self.max_n, self.seeds.get(key, 0))
        return value_cell(values, self.states.get(key, []), expected, self.digits)


def _first_line(text: str, limit: int = 160) -> str:
    """An error's first line, shortened: the full text is in the run's status.json."""
    line = text.strip().splitlines()[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def unfinished_notes(runs: pd.DataFrame) -> list[str]:
    """A line per run that is not in the table: unfinished, failed, or skipped (and why)."""
    notes = []
    for _, run in runs[runs["state"] != RunState.DONE].sort_values("run_id").iterrows():
        note = run.get("note")
        reason = f" ({_first_line(note)})" if isinstance(note, str) and note.strip() else ""
        if run["state"] == RunState.STALE:
            reason += ": rerun the same `bench run` to retrain it"
        notes.append(f"{run['run_id']}: {run['state']}{reason}")
    return notes


def block_where(protocol: str, preset: str) -> str:
    """How an error names the block it is about."""
    return f" (protocol {protocol}, preset {preset})"


def block_meta(protocol: str, preset: str, opts: ReportOptions | None = None) -> dict[str, str]:
    """A table's metadata (the CSV's columns): its block, and the options of its numbers."""
    meta = {"protocol": protocol, "preset": preset}
    if opts is not None:
        meta.update(selection=opts.selection, split=opts.split, metric=opts.metric)
    return meta
