"""Finished runs of a run store as the rows of the reproduction CSV (read, written, merged).

:func:`export_frame` reads a run store (never writes to it) and returns one row per done run and
selection (test split) with the columns of :data:`COLUMNS`. A run off its recipe carries what
it changed in ``overrides``; two runs that would make the same row are an error.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from debias_bench.config.run_config import OFF_RECIPE_LAYERS, RunConfig
from debias_bench.data.facts import off_recipe_data_options
from debias_bench.errors import ConfigError
from debias_bench.reporting.records import run_rows
from debias_bench.runs.jsonio import write_output
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

#: evaluations at the end of a run that :data:`TAIL_COLUMN` averages (test accuracy)
TAIL = 10
TAIL_COLUMN = f"last{TAIL}_accuracy"
COLUMNS = [
    "method",
    "dataset",
    "ratio",
    "seed",
    "protocol",
    "preset",
    "overrides",
    "selection",
    "accuracy",
    "aligned_accuracy",
    "conflicting_accuracy",
    "worst_group_accuracy",
    TAIL_COLUMN,
    "epochs",
    "train_time_s",
    "device",
    "code_version",
]


def export_frame(
    store: RunStore, dataset: str | None = None, stale: bool = False
) -> tuple[pd.DataFrame, list[str]]:
    """(rows of the done runs, ids of the runs that are not done) of ``store``.

    One row per done run and selection, test split only, sorted for a stable diff. With
    ``stale``, runs that finished under older code of their method or dataset are exported
    too, under the code version that trained them (``code_version``)."""
    rows: list[dict[str, Any]] = []
    run_ids: list[str] = []  # the run of each row
    unfinished: list[str] = []
    exported = (RunState.DONE.value, RunState.STALE.value) if stale else (RunState.DONE.value,)
    for run_dir in store.runs():
        records = run_rows(run_dir, stale_results=stale)
        if not records or (dataset and records[0].get("dataset") != dataset):
            continue
        if records[0]["state"] not in exported or records[0].get("selection") is None:
            unfinished.append(f"{run_dir.run_id} ({records[0]['state']})")
            continue
        result = run_dir.result() or {}
        per_run = {  # read once per run, the same on each of its selections
            "overrides": overrides(run_dir.config()),
            TAIL_COLUMN: tail_accuracy(run_dir.metrics()),
            "epochs": result.get("epochs"),
            "code_version": code_version(run_dir, result),
        }
        for record in records:
            if record["split"] == "test":
                rows.append({**{k: record.get(k) for k in COLUMNS}, **per_run})
                run_ids.append(run_dir.run_id)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    _check_one_run_per_row(frame, run_ids)
    frame = frame.sort_values(SORT, kind="stable")
    return frame.reset_index(drop=True), sorted(unfinished)


def _check_one_run_per_row(frame: pd.DataFrame, run_ids: list[str]) -> None:
    """A ConfigError when two runs export as the same row (:data:`ROW_KEY`), so that the table
    would count one seed twice: two configurations that differ only where the export does not
    look (a build option given at its default, a run of older code beside its rerun)."""
    owners: dict[tuple[str, ...], str] = {}
    keys = frame[ROW_KEY].astype(str).itertuples(index=False)
    for key, run_id in zip(keys, run_ids, strict=True):
        other = owners.setdefault(tuple(key), run_id)
        if other != run_id:
            raise ConfigError(
                f"runs {other} and {run_id} export as the same row "
                f"({', '.join(f'{k}={v}' for k, v in zip(ROW_KEY, key, strict=True))})",
                hint="compare their config.json; move one out of the store, or export them "
                "from separate --out folders",
            )


def tail_accuracy(evaluations: list[dict[str, Any]]) -> float | None:
    """The mean test accuracy of a run's last :data:`TAIL` evaluations (None with fewer): what
    its ``last`` number would be without the noise of one evaluation, such as a one-epoch dip
    under a growing learning rate."""
    values = [e["test"]["accuracy"] for e in evaluations if "accuracy" in (e.get("test") or {})]
    return sum(values[-TAIL:]) / TAIL if len(values) >= TAIL else None


def code_version(run_dir: RunDir, result: dict[str, Any]) -> str | None:
    """``0.1.0+g<commit>``: the package version and the commit of the code that trained the
    run (recorded in its status at its last start; before that was recorded, the provenance of
    the code that planned it, in its config), or the version alone where neither knows it."""
    version = result.get("code_version")
    commit = None
    for read in (run_dir.status, run_dir.config):
        with contextlib.suppress(Exception):  # an unreadable file: the next, or the version
            commit = commit or (read().get("provenance") or {}).get("git_commit")
    return f"{version}+g{commit[:10]}" if version and commit else version


def overrides(config: dict[str, Any]) -> str:
    """The settings a run took from outside its recipe and preset (``--set``, ``--epochs``, a
    tuned file) as sorted ``key=value`` pairs, then the build options that give it other data
    than its recipe's (``--data-option``, ``--data-seed``) as ``data:key=value``; ``""`` for a
    run of the recipe. Speed-only settings (left out of the run id) do not count."""
    hparams = config.get("hparams") or {}
    try:
        counted = RunConfig.from_json(config).identity()["hparams"]
    except Exception:  # a method this process does not know: every setting counts
        counted = hparams
    sources = config.get("sources") or {}
    keys = sorted(k for k, src in sources.items() if src in OFF_RECIPE_LAYERS and k in counted)
    pairs = [f"{k}={_value(hparams.get(k))}" for k in keys]
    data = off_recipe_data(config)
    pairs += [f"data:{k}={_value(data[k])}" for k in sorted(data)]
    return ", ".join(pairs)


def off_recipe_data(config: dict[str, Any]) -> dict[str, Any]:
    """The recorded build options of a run that differ from its preset's recipe."""
    options = config.get("data_options") or {}
    try:
        return off_recipe_data_options(config.get("preset", "paper"), config["dataset"], options)
    except Exception:  # a dataset this process does not know: all but the default data seed
        return {k: v for k, v in options.items() if (k, v) != ("data_seed", 0)}


def _value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


#: columns added after the first exports (read as empty from those: ``overrides`` came after
#: exports that only ever held runs of the recipe)
LATER_COLUMNS: dict[str, Any] = {
    "worst_group_accuracy": float("nan"),
    "overrides": "",
    TAIL_COLUMN: float("nan"),
}
#: what identifies a row of the export: one run's one selection
ROW_KEY = ["method", "dataset", "ratio", "seed", "protocol", "preset", "overrides", "selection"]
SORT = ["dataset", "method", "ratio", "seed", "overrides", "selection"]


def merge_frames(kept: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``kept`` (an earlier export) with ``new``'s rows added; a row of ``new`` replaces the
    row of ``kept`` with the same :data:`ROW_KEY` (the reproduction spans run stores of
    several sessions). Columns an earlier export lacks stay empty for its rows."""
    key = ROW_KEY
    new_keys = set(map(tuple, new[key].astype(str).itertuples(index=False)))
    old_keys = kept[key].astype(str).itertuples(index=False)
    keep = kept[[tuple(k) not in new_keys for k in old_keys]]
    frame = pd.concat([keep, new], ignore_index=True).reindex(columns=COLUMNS)
    frame = frame.sort_values(SORT, kind="stable")
    return frame.reset_index(drop=True)


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """Atomically (a kill leaves the previous export); a failure is one error naming ``-o``."""
    write_output(path, frame.to_csv(index=False, float_format="%.4f"))


def read_csv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise ConfigError(f"no reproduction CSV at {path}", hint="bench reproduce export first")
    frame = pd.read_csv(path)
    for column, empty in LATER_COLUMNS.items():  # exports written before these columns were
        if column not in frame.columns:
            frame[column] = empty
    # an all-empty column reads as floats (NaN): the recipe
    frame["overrides"] = [v if isinstance(v, str) else "" for v in frame["overrides"]]
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(
            f"{path} lacks the columns {', '.join(missing)}",
            hint="write it with `bench reproduce export`",
        )
    frame["ratio"] = frame["ratio"].astype(float)
    return frame
