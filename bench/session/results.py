"""``debias_bench.results``: a run store as one pandas DataFrame, for notebooks.

One row per run and model selection (the test split's metrics by default), with the run's
state; a run that is not done has one row with no numbers. The same reader as ``bench report``
(:func:`~debias_bench.reporting.load_records`), so the means of a DataFrame grouped by method,
dataset and ratio are the numbers of the report's cells for the same filters.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from debias_bench.reporting.foreign import foreign_runs
from debias_bench.reporting.grouping import apply_where
from debias_bench.reporting.records import METRICS, load_records
from debias_bench.runs.store import check_store

#: the columns of :func:`results`, in order
COLUMNS = [
    "method",
    "dataset",
    "ratio",
    "seed",
    "protocol",
    "preset",
    "selection",
    "split",
    *METRICS,
    "state",
    "run_id",
    "train_time_s",
    "terms",
    "note",
]


def results(
    store: str | Path,
    preset: str | None = None,
    protocol: str | None = None,
    selection: str | None = "last",
    where: Mapping[str, str] | None = None,
    split: str = "test",
) -> pd.DataFrame:
    """The runs of ``store`` as a DataFrame of :data:`COLUMNS`: one row per (run, selection)
    of a done run on ``split``, one row per run in another state (no numbers, ``note`` says
    why). ``preset``, ``protocol``, ``selection`` (None: every selection; by default the
    last model, as ``bench report``) and ``where`` (``{"lr": "0.001"}``, as ``bench report
    --where``) keep the matching rows. Runs of a plugin that is not loaded are
    left out (load it first: ``debias_bench.plugins.loading.import_plugins``). Raises
    :class:`~debias_bench.errors.ConfigError` when ``store`` is no run store."""
    runs = check_store(Path(store))
    records = load_records(runs, skip=foreign_runs(runs).run_ids)
    records = apply_where(records, dict(where or {}))
    keep = records["split"].isna() | (records["split"] == split)
    for column, wanted in (("preset", preset), ("protocol", protocol)):
        if wanted is not None:
            keep &= records[column] == wanted
    if selection is not None:
        keep &= records["selection"].isna() | (records["selection"] == selection)
    frame = records.loc[keep, COLUMNS].reset_index(drop=True)
    return frame.sort_values(["dataset", "method", "ratio", "seed", "selection"], kind="stable")
