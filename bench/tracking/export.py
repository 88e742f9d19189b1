"""``bench track export``: send an existing run store to trackers. Idempotent: each run's
``tracking.json`` says what a target already has, so a second export sends nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

from .session import FINAL, RunTracking
from .spec import TrackSpec, experiment_name, prepare_trackers

#: states whose runs are left out, and why
NOT_EXPORTED = {
    RunState.PENDING: "not started",
    RunState.RUNNING: "running: its own process sends it, or export again when it ends",
    RunState.CORRUPT: "corrupt (bench status names the file)",
    RunState.STALE: "trained by other code (stale)",
}


@dataclass
class ExportSummary:
    sent_runs: int = 0
    sent_records: int = 0
    up_to_date: int = 0
    left_out: dict[str, str] = field(default_factory=dict)  # run id -> why


def _up_to_date(cursor: dict | None, state: RunState, last_step: int) -> bool:
    if not cursor:
        return False
    closed = state not in FINAL or cursor.get("state") == state.value
    return closed and int(cursor.get("step", -1)) >= last_step


def export_run(specs: list[TrackSpec], run_dir: RunDir, experiment: str) -> int | str:
    """Send what the targets lack of one run; returns the number of records sent (``-1``:
    the targets were up to date), or why the run was left out."""
    state = run_dir.effective_state()
    if state in NOT_EXPORTED:
        return NOT_EXPORTED[state]
    records = run_dir.metrics()
    last = max((int(r["step"]) for r in records), default=-1)
    cursors = run_dir.tracking()
    todo = [s for s in specs if not _up_to_date(cursors.get(s.key), state, last)]
    if not todo:
        return -1
    with run_dir.claim() as owned:
        if not owned:
            return NOT_EXPORTED[RunState.RUNNING]
        tracking = RunTracking(todo, run_dir, experiment)
        tracking.start()
        sent = sum(tracking.record(record) > 0 for record in records)
        if state in FINAL:
            tracking.finish(state)
    return sent


def export_store(store: RunStore, specs: list[TrackSpec]) -> ExportSummary:
    experiment = experiment_name(store.root)
    prepare_trackers(specs, store.root)
    summary = ExportSummary()
    for run_dir in store.runs():
        sent = export_run(specs, run_dir, experiment)
        if isinstance(sent, str):
            summary.left_out[run_dir.run_id] = sent
        elif sent < 0:
            summary.up_to_date += 1
        else:
            summary.sent_runs += 1
            summary.sent_records += sent
    return summary
