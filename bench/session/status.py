"""``debias_bench.status`` (and ``bench status``): the state of every run in a run store, from
any shell, at any time.

It only reads: each run's ``status.json`` and lock (a run whose process is gone is ``dead``,
never ``running``; a sweep records its runs as ``pending`` before it starts them) and, when
runs were submitted to SLURM, one ``squeue`` call (``queued`` jobs). A run with an unreadable
or missing ``config.json``, ``status.json`` or ``result.json`` is ``corrupt``: listed with the
file and the fix, never in the way of the others. A failed run shows its reason (``diverged``,
``timed out``, ``disk full``, ...: :class:`~debias_bench.runs.states.FailReason`).
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from debias_bench.errors import ConfigError, CorruptDataError
from debias_bench.launchers.slurm_queue import queue_label, squeue_states
from debias_bench.plugins.loading import PLUGINS_ENV
from debias_bench.reporting.foreign import ForeignRuns, foreign_runs
from debias_bench.runs.eta import config_kind, run_duration, time_left
from debias_bench.runs.progress import UNLOADED, Live, fmt_duration
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import COUNTED_AS, RunState, effective_state, failure_reason
from debias_bench.runs.store import RunStore, check_store


def _queue(job_ids: set[str]) -> dict[str, str]:
    """SLURM states of ``job_ids`` that are still queued or running ({} without SLURM)."""
    if not job_ids or not shutil.which("squeue"):
        return {}

    states = squeue_states() or {}
    return {j: queue_label(states[j]) for j in job_ids if j in states}


def collect(store: RunStore, skip: Collection[str] = ()) -> list[dict[str, Any]]:
    """One record per run of the store, but the runs in ``skip``."""
    records = []
    for run_dir in store.runs():
        if run_dir.run_id in skip:
            continue
        facts = run_dir.facts()
        state = effective_state(facts)
        try:
            status = run_dir.status()
        except CorruptDataError:
            status = {}
        record = _record(run_dir, status, state)
        record["fault"] = facts.fault
        if facts.fault:  # the table's note: the file and the problem, relative to --out
            record["note"] = facts.fault.replace(f"{store.root}/", "")
        elif state is RunState.STALE:
            record["note"] = facts.stale
        records.append(record)
    in_queue = _queue({r["job_id"] for r in records if r["job_id"]})
    for r in records:
        # A job SLURM still holds whose run has not (re)started yet.
        resumable = (RunState.PENDING, RunState.INTERRUPTED, RunState.DEAD, RunState.FAILED)
        if r["job_id"] in in_queue and r["state"] in resumable:
            r["state"] = in_queue[r["job_id"]]
            r["note"] = f"SLURM job {r['job_id']} {r['state']}"
    return records


def _record(run_dir: RunDir, status: dict, state: RunState) -> dict[str, Any]:
    result = (run_dir.result() or {}) if state is RunState.DONE else {}
    last = result.get("selections", {}).get("last", {}).get("test", {})
    # the job a run was last submitted as, unless that job is the one running it
    job_id = status.get("slurm_job_id")
    if state is not RunState.RUNNING:
        job_id = status.get("submitted_job_id") or job_id
    live = Live.from_status(status) if state is RunState.RUNNING else None
    where = ""
    if status.get("host"):
        where = f"{status['host']}:{status.get('pid', '')}"
        if status.get("gpu") not in (None, ""):
            where += f" gpu {status['gpu']}"
    config = _config(run_dir)
    return {
        "run_id": run_dir.run_id,
        "kind": config_kind(config) if config else None,
        "preset": config.get("preset", ""),
        "protocol": config.get("protocol", ""),
        "duration": run_duration(status) if state is RunState.DONE else None,
        "state": state,
        "status": status,
        "attempt": status.get("attempt", 0),
        "step": _step(status, live),
        "live": live,
        "exit_code": status.get("exit_code"),
        "job_id": job_id,
        "where": where,
        "accuracy": last.get("accuracy"),
        "train_time": result.get("train_time_s"),
        "reason": failure_reason(status) if state is RunState.FAILED else None,
        "note": _note(status, state),
    }


def _config(run_dir: RunDir) -> dict[str, Any]:
    """Its ``config.json``; {} when it cannot be read (shown as corrupt elsewhere)."""
    try:
        config = run_dir.config()
        return config if isinstance(config, dict) and "dataset" in config else {}
    except Exception:  # no config yet, or a corrupt one
        return {}


def _note(status: dict[str, Any], state: RunState) -> str:
    """The run's note: a failure's reason and error, a skip's reason, or the last note."""
    error = status.get("error") or ""
    if state is RunState.FAILED:
        return f"{failure_reason(status)}: {error}" if error else str(failure_reason(status))
    return error or status.get("reason") or status.get("note") or ""


def unloaded(foreign: ForeignRuns) -> list[dict[str, Any]]:
    """A record per run of a plugin that is not loaded: listed and counted, never placed."""
    return [
        {
            **dict.fromkeys(("kind", "duration", "step", "live", "exit_code", "job_id")),
            **dict.fromkeys(("accuracy", "train_time", "reason", "fault")),
            "run_id": run_id,
            **recorded,
            "state": UNLOADED,
            "status": {},
            "attempt": 0,
            "where": "",
            "note": f"{' and '.join(names)} not registered: load its plugin ({PLUGINS_ENV})",
        }
        for run_id, (names, recorded) in sorted(foreign.by_run.items())
    ]


#: the states of runs still to start, as the ETA counts them
WAITING = (RunState.PENDING, RunState.INTERRUPTED, RunState.STALE, "queued")

#: the states ``bench status --failed`` lists
PROBLEMS = (RunState.FAILED, RunState.DEAD, RunState.CORRUPT)


def counts_and_eta(records: list[dict[str, Any]]) -> tuple[Counter, float | None]:
    """Runs per state, and the ETA the sweep's summary line shows for the same store
    (:func:`~debias_bench.runs.eta.time_left`, from the same facts)."""
    counts: Counter = Counter()
    for r in records:
        counts[COUNTED_AS.get(r["state"], r["state"])] += 1
    finished = [(r["kind"], r["duration"]) for r in records if r["duration"] is not None]
    running = [(r["kind"], r["live"]) for r in records if r["state"] == RunState.RUNNING]
    waiting = [r["kind"] for r in records if r["state"] in WAITING]
    return counts, time_left(finished, waiting, running)


def _step(status: dict[str, Any], live: Live | None) -> str:
    """``120/240``; a running run's pace too: ``120/240 (35.2/s, ETA 4s)``."""
    text = f"{status.get('step', 0)}/{status.get('total_steps', '?')}"
    if live is not None and live.steps_per_s:
        text += f" ({live.steps_per_s:.3g}/s"
        text += f", ETA {fmt_duration(live.eta_s)})" if live.eta_s is not None else ")"
    return text


@dataclass
class StoreStatus:
    """Every run of a store with its state (``records``: one dict per run, plugins' runs that
    are not loaded included as ``not loaded``), and the notes ``bench status`` prints."""

    root: Path
    records: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def store_status(out: str | Path) -> StoreStatus:
    """The state of every run folder under ``out``; a ConfigError when it is no run store or
    holds only runs of a plugin that is not loaded."""
    store = check_store(out)  # no store at --out: one error naming it
    foreign = foreign_runs(store)  # a plugin not loaded: its runs cannot be placed
    records = collect(store, skip=foreign.run_ids)
    notes = []
    if foreign.run_ids and not records:
        raise ConfigError(f"nothing to show: {foreign.text()}", hint=foreign.hint("status"))
    if foreign.run_ids:  # listed and counted as not loaded, named with the fix
        notes.append(f"{foreign.text()}; {foreign.hint('status')}")
        records += unloaded(foreign)
    others = store.other_folders()
    if others:
        names = ", ".join(p.name for p in others[:5]) + (", ..." if len(others) > 5 else "")
        notes.append(
            f"{len(others)} folder{'s' * (len(others) != 1)} under {store.root} "
            f"hold{'s' * (len(others) == 1)} no run (no config.json, status.json, result.json, "
            f"metrics.jsonl or checkpoint.pt, or moved aside as .bad): {names}"
        )
    return StoreStatus(store.root, records, notes)


#: the columns of :func:`status`
STATUS_COLUMNS = [
    "run_id", "preset", "protocol", "state", "reason", "attempt", "step", "exit_code", "job_id",
    "where", "accuracy", "train_time", "note",
]  # fmt: skip


def status(store: str | Path) -> pd.DataFrame:
    """``bench status`` as a DataFrame: one row per run folder of ``store`` (:data:`
    STATUS_COLUMNS`; ``accuracy``: the last model's test accuracy of a done run)."""
    records = store_status(store).records
    frame = pd.DataFrame(
        [{k: (str(r[k]) if k == "state" else r[k]) for k in STATUS_COLUMNS} for r in records],
        columns=STATUS_COLUMNS,
    )
    return frame
