"""Run records as a tidy DataFrame: a pure read of the run store, safe while a sweep runs.

A run whose files cannot be read is listed as ``corrupt`` (with the file and the fix) and never
stops the report; its method, dataset, ratio and seed then come from its run id.

A split's ``adjusted_average`` (Waterbirds: the ``subpop`` table's adjusted average) is computed
here from the group accuracies its result records and the weights its dataset's family declares
(:func:`adjusted_average_of`); every other dataset's is None.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

import pandas as pd

from debias_bench.config.sampling import variant_key
from debias_bench.config.selection import adjusted_average, worst_group
from debias_bench.config.terms import run_terms
from debias_bench.errors import CorruptDataError
from debias_bench.registry import DATASETS
from debias_bench.reporting.grouping import FINGERPRINT, fingerprint, identity, recorded
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState, effective_state, failure_reason
from debias_bench.runs.store import RunStore

METRICS = (
    "accuracy",
    "aligned_accuracy",
    "conflicting_accuracy",
    "group_mean_accuracy",
    "worst_group_accuracy",
)
#: how many samples each accuracy was measured on (``n`` for ``accuracy``, and so on)
COUNTS = {
    "accuracy": "n",
    "aligned_accuracy": "n_aligned",
    "conflicting_accuracy": "n_conflicting",
    "worst_group_accuracy": "n_worst_group",
}
RUN_COLUMNS = ["run_id", "method", "dataset", "ratio", "seed", "protocol", "preset", "state"]
RESULT_COLUMNS = ["train_time_s", "prepare_time_s", "peak_memory_mb", "device"]
#: the run's recorded config (``--where``), its configuration (seed left out), data and terms
#: (``debias_bench.config.terms``)
CONFIG_COLUMNS = ["config", "identity", FINGERPRINT, "terms"]
COLUMNS = [
    *RUN_COLUMNS,
    "selection",
    "split",
    "step",
    *METRICS,
    *COUNTS.values(),
    "adjusted_average",
    "per_class_accuracy",
    "worst_group",
    *RESULT_COLUMNS,
    "note",
    *CONFIG_COLUMNS,
]
_RUN_ID = re.compile(r"^(?P<rest>.+)_r(?P<ratio>[^_]+)_s(?P<seed>\d+)_[0-9a-f]+$")


def _status_note(status: dict[str, Any]) -> str | None:
    """A failure's reason and error, a skip's reason, or the last note."""
    reason = failure_reason(status)
    error = status.get("error")
    if reason is not None:
        return f"{reason}: {error}" if error else str(reason)
    return error or status.get("reason") or status.get("note")


def from_run_id(run_id: str) -> dict[str, Any]:
    """Method, dataset, ratio and seed from a run id (``cmnist_lff_r5_s0_1a2b3c4d5e``), for
    a run whose config.json cannot be read."""
    match = _RUN_ID.match(run_id)
    if not match:
        return {}
    rest = match["rest"]
    names = sorted((n for n in DATASETS.names() if rest.startswith(f"{n}_")), key=len)
    dataset = names[-1] if names else rest.split("_", 1)[0]
    try:
        ratio = float(match["ratio"])
    except ValueError:
        ratio = None
    return {
        "dataset": dataset,
        "method": rest[len(dataset) + 1 :],
        "ratio": ratio,
        "seed": int(match["seed"]),
    }


def run_rows(run_dir: RunDir, stale_results: bool = False) -> list[dict[str, Any]]:
    """The rows of one run: one per (selection, split) when done, else one with its state.
    With ``stale_results``, a stale run that finished gives its result's rows too (state
    ``stale``, the note saying what changed): what older code of its method or dataset made."""
    facts = run_dir.facts()
    state = effective_state(facts)
    try:
        config = run_dir.config()
    except CorruptDataError:
        config = {}
    base = {k: config.get(k) for k in RUN_COLUMNS if k in config} or from_run_id(run_dir.run_id)
    if config.get("method"):  # a declared variant (sampling=loss_weights) is a method of its own
        base["method"] = variant_key(config["method"], config.get("hparams") or {})
    base.update(run_id=run_dir.run_id, state=state.value)
    if config and not facts.fault:  # a corrupt run is in no configuration (nor its check)
        base.update(config=recorded(config), identity=identity(config), terms=run_terms(config))
        base[FINGERPRINT] = fingerprint(config, None)
    if facts.fault:  # one line, paths relative to the store: the tables list it under them
        fault = facts.fault.replace(f"{run_dir.path.parent}/", "").replace("\n  hint: ", "; ")
        return [{**base, "note": fault}]
    if state is RunState.STALE:
        base["note"] = facts.stale
        if not (stale_results and run_dir.result_path.is_file()):
            return [base]
    elif state is not RunState.DONE:
        return [{**base, "note": _status_note(run_dir.status())}]
    result = run_dir.result() or {}
    base.update({k: result.get(k) for k in RESULT_COLUMNS})
    base[FINGERPRINT] = fingerprint(config, result)
    if config and base[FINGERPRINT]:  # --where data_fingerprint=... matches it too
        base["config"] = {**(base["config"] or {}), FINGERPRINT: base[FINGERPRINT]}
    weights = adjusted_weights(base.get("dataset"))
    rows = []
    for selection, chosen in result["selections"].items():
        for split in ("valid", "test"):
            metrics = with_worst_group(chosen[split])
            rows.append(
                {
                    **base,
                    "selection": selection,
                    "split": split,
                    "step": chosen.get("step"),
                    **{m: metrics.get(m) for m in METRICS},
                    **{c: metrics.get(c) for c in COUNTS.values()},
                    "adjusted_average": adjusted_average_of(metrics, weights),
                    "per_class_accuracy": metrics.get("per_class_accuracy"),
                    "worst_group": metrics.get("worst_group"),
                }
            )
    return rows


def adjusted_weights(dataset: str | None) -> Sequence[Sequence[int]] | None:
    """The (class x bias) weights of the adjusted average that ``dataset``'s family declares
    (``adjusted_weights``: Waterbirds' training groups), None for a family without them or a
    dataset not registered."""
    if not dataset or dataset not in DATASETS:
        return None
    return getattr(DATASETS.get(dataset), "adjusted_weights", None)


def adjusted_average_of(
    metrics: dict[str, Any], weights: Sequence[Sequence[int]] | None
) -> float | None:
    """A split's adjusted average: its recorded ``group_accuracy`` weighted by ``weights``
    (:func:`debias_bench.config.selection.adjusted_average`, its one computation); None
    without weights, without group accuracies (a result recorded before they were), with a
    weighted group empty, or with groups of another shape than the weights'."""
    groups = metrics.get("group_accuracy")
    if not weights or not isinstance(groups, list):
        return None
    try:
        return adjusted_average(groups, weights)
    except (TypeError, ValueError):  # not a (class x bias) grid of the weights' shape
        return None


def with_worst_group(metrics: dict[str, Any]) -> dict[str, Any]:
    """A split's metrics with its worst group, derived from its group accuracies for results
    recorded before the worst group was (their image count stays unknown)."""
    if "worst_group_accuracy" in metrics:
        return metrics
    acc, group, n = worst_group(metrics.get("group_accuracy") or [], metrics.get("group_counts"))
    return {**metrics, "worst_group_accuracy": acc, "worst_group": group, "n_worst_group": n}


def load_records(store: RunStore, skip: Collection[str] = ()) -> pd.DataFrame:
    """One row per (run, selection, split) for finished runs, one row per unfinished run;
    none for the runs in ``skip`` (run ids)."""
    rows = [
        row for run_dir in store.runs() if run_dir.run_id not in skip for row in run_rows(run_dir)
    ]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["ratio"] = frame["ratio"].astype(float)
    return frame
