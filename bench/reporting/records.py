"""Run records as a tidy DataFrame: a pure read of the run store, safe while a sweep runs."""

from __future__ import annotations

from typing import Any

import pandas as pd

from debias_bench.errors import CorruptDataError
from debias_bench.store import RunDir, RunStore

METRICS = ("accuracy", "aligned_accuracy", "conflicting_accuracy", "group_mean_accuracy")
RUN_COLUMNS = ["run_id", "method", "dataset", "ratio", "seed", "protocol", "preset", "state"]
RESULT_COLUMNS = ["train_time_s", "prepare_time_s", "peak_memory_mb", "device"]
COLUMNS = [
    *RUN_COLUMNS,
    "selection",
    "split",
    "step",
    *METRICS,
    "per_class_accuracy",
    *RESULT_COLUMNS,
    "note",
]


def _status_note(status: dict[str, Any]) -> str | None:
    return status.get("error") or status.get("reason") or status.get("note")


def run_rows(run_dir: RunDir) -> list[dict[str, Any]]:
    """The rows of one run: one per (selection, split) when done, else one with its state."""
    config = run_dir.config()
    base = {k: config.get(k) for k in RUN_COLUMNS if k in config}
    base.update(run_id=run_dir.run_id, state=run_dir.effective_state())
    try:
        result = run_dir.result()
    except CorruptDataError as exc:  # a foreign or torn result.json: listed, not fatal
        return [{**base, "state": "failed", "note": str(exc)}]
    if result is None:
        return [{**base, "note": _status_note(run_dir.status())}]
    base.update(state="done", **{k: result.get(k) for k in RESULT_COLUMNS})
    rows = []
    for selection, chosen in result["selections"].items():
        for split in ("valid", "test"):
            metrics = chosen[split]
            rows.append(
                {
                    **base,
                    "selection": selection,
                    "split": split,
                    "step": chosen["step"],
                    **{m: metrics.get(m) for m in METRICS},
                    "per_class_accuracy": metrics.get("per_class_accuracy"),
                }
            )
    return rows


def load_records(store: RunStore) -> pd.DataFrame:
    """One row per (run, selection, split) for finished runs, one row per unfinished run."""
    rows = [row for run_dir in store.runs() for row in run_rows(run_dir)]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["ratio"] = frame["ratio"].astype(float)
    return frame
