"""How a run's Ray task ended, as the sweep counts it (:class:`~.scheduler.Ended`).

A task that returned gives the state its supervisor recorded (:func:`returned`). A task that
raised (its Ray worker killed, the task cancelled, its node lost, a supervisor that could not
start) says nothing about the run: the run store does (:func:`after_error`). Its supervisor
may still be stopping the run, which then checkpoints and records ``interrupted``; the sweep
asks again until the run has let go of its lock, or until its patience ends (a run on a lost
node, still ``running`` for the store until its heartbeat is stale, is then left to the
sweep, which waits for it like any run another process holds). A run that never started is
recorded ``failed`` (did not start) with Ray's error; one left ``running`` by a process that
is gone is recorded ``dead``, and a rerun resumes it.
"""

from __future__ import annotations

import time

from debias_bench.launchers.run_one import record_not_started
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState

from .scheduler import Ended, Task

#: the fields of ``status.json`` that say what happened, most telling first
_NOTE_FIELDS = ("error", "reason", "note")


def _note(status: dict[str, object], fields: tuple[str, ...] = _NOTE_FIELDS) -> str:
    return next((str(status[f]) for f in fields if status.get(f)), "")


def returned(task: Task, run_dir: RunDir, state_text: str) -> Ended:
    """The run's outcome when its task returned ``state_text`` (what its supervisor recorded;
    ``running``: another live process holds the run, the sweep waits for it)."""
    try:
        state = RunState(state_text)
    except ValueError:
        state = run_dir.effective_state()
    status = run_dir.status() if not run_dir.fault() else {}
    note = _note(status)
    if state in (RunState.INTERRUPTED, RunState.PENDING):  # why, and where it resumes
        note = _note(status, ("note", "error", "reason"))
    return Ended(task, state, note, ran=state is not RunState.RUNNING)


def after_error(
    task: Task, run_dir: RunDir, token: str, error: str, patience_over: bool
) -> Ended | None:
    """The run's outcome after its task raised ``error``; None while its supervisor may
    still be recording it (ask again later), unless ``patience_over``. ``token`` tells this
    submission's record (``ray_submission`` in ``status.json``) from an earlier one's."""
    if run_dir.is_done():
        return Ended(task, RunState.DONE)
    fault = run_dir.fault()
    if fault:  # a torn status.json: the run is corrupt, named with its file and fix
        return Ended(task, RunState.CORRUPT, fault, ran=False)
    status, state = run_dir.status(), run_dir.effective_state()
    ours = status.get("ray_submission") == token
    if state is RunState.RUNNING:  # its worker still stops (or another process holds it)
        if not patience_over:
            return None
        return Ended(task, RunState.RUNNING, f"the Ray task ended ({error})", ran=False)
    if state is RunState.DEAD:
        if not patience_over and ours and "ended" not in status:
            return None  # its supervisor records the worker's exit in a moment
        note = f"the Ray task ended ({error}) while the run was running; a rerun resumes it"
        with run_dir.claim() as owned:
            if owned and run_dir.effective_state(owned=True) is RunState.DEAD:
                run_dir.mark_dead(note, ended=time.time())
        return Ended(task, RunState.DEAD, note)
    if ours and state is not RunState.PENDING:  # it ran under this task and recorded its end
        recorded = _note(status, ("note", "error", "reason"))
        note = f"the Ray task ended ({error}); {recorded or 'a rerun resumes it'}"
        return Ended(task, state, note if state is RunState.INTERRUPTED else _note(status))
    if error.startswith("cancelled"):  # stopped before it started: still to run
        return Ended(task, RunState.PENDING, "stopped before it started", ran=False)
    error = f"the Ray task ended before the run started: {error}"
    return Ended(task, RunState.FAILED, record_not_started(run_dir, task.config, error))
