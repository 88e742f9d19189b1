"""Executing one run of a sweep, skipping what is already done (the grid:
``debias_bench.config.grid``).

:func:`run_one` executes a run in the calling process (the ``inline`` launcher calls it
directly; the ``local`` and ``slurm`` launchers call it in a worker process, see
``debias_bench.launchers``). It first takes the run's lock, so two sweeps never train the same
run at once, then decides from the recorded state (:func:`decide`):

* done (or skipped by the method) -> nothing to do;
* running in a live process -> left alone;
* pending or interrupted -> started, or resumed from its checkpoint;
* dead (its process vanished without recording an outcome) -> resumed from its checkpoint, as
  a new attempt, unless it already used ``max_attempts`` (then recorded as failed);
* failed -> rerun only with ``retry_failed`` and while fewer than ``max_attempts`` were made;
* corrupt (an unreadable config, status or result file) -> left alone, with the file and the fix.

The states and the decision live in :mod:`debias_bench.runs.states`. A failure while writing the
store (a full disk) fails the run with the path and errno, and its temporary files are removed.

``attempt`` counts the starts that were not resumptions of a requested stop (an interruption
by a signal or a SLURM preemption is not a new attempt).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from debias_bench.config.run_config import RunConfig
from debias_bench.errors import BenchError, FailReason, Interrupted, RunFailure
from debias_bench.paths import DataPlace
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.heartbeat import Heartbeat
from debias_bench.runs.progress import Pace, Progress
from debias_bench.runs.provenance import config_json, provenance
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import (
    Decision,
    RunState,
    classify,
    clock_skew,
    effective_state,
    parse_state,
)
from debias_bench.runs.states import decide as decide_state
from debias_bench.runs.store import RunStore
from debias_bench.tracking import RunTracking, TrackSpec, experiment_name

if TYPE_CHECKING:
    import torch

#: default of ``--max-attempts``
MAX_ATTEMPTS = 3
#: the note of a run that a ``KeyboardInterrupt`` stopped
KEYBOARD_NOTE = "keyboard interrupt; a rerun resumes from its last checkpoint"


class ExitCalled(SystemExit):
    """``os._exit(code)`` called by a run's code in the process that trains it, raised instead
    of ending the process at once (:func:`exits_raise`): the run is recorded as failed
    (crashed) like a ``sys.exit()``, and an inline sweep goes on and prints its summary."""


@contextlib.contextmanager
def exits_raise() -> Iterator[None]:
    """For the block, ``os._exit()`` in this process's main thread raises :class:`ExitCalled`.

    ``os._exit`` ends a process with no exception, no ``finally`` and no ``atexit``: in the
    ``bench`` process itself (the inline launcher) ``os._exit(0)`` in a method would end the
    sweep with no summary and exit code 0, the run left ``running``. A child forked during the
    run (a DataLoader worker, whose ``multiprocessing`` bootstrap ends in ``os._exit``) exits
    as before; another thread of this process exits it too, but never with code 0."""
    real, pid = os._exit, os.getpid()
    modules = [m for m in (os, sys.modules.get("posix"), sys.modules.get("nt")) if m is not None]

    def guarded(code: int) -> NoReturn:
        if os.getpid() != pid:
            real(code)
        if threading.current_thread() is threading.main_thread():
            raise ExitCalled(code)
        print(
            f"the run's code called os._exit({code!r}) in thread "
            f"{threading.current_thread().name}: this process exits now",
            file=sys.stderr,
            flush=True,
        )
        real(code or 1)

    for module in modules:
        module._exit = guarded  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in modules:
            module._exit = real  # type: ignore[attr-defined]


@dataclass
class Outcome:
    config: RunConfig
    run_dir: RunDir
    state: RunState  # done | skipped | failed | interrupted | running | corrupt | pending
    note: str = ""
    result: dict[str, Any] | None = None
    ran: bool = False


def decide(
    run_dir: RunDir, retry_failed: bool, max_attempts: int = MAX_ATTEMPTS, owned: bool = False
) -> Decision:
    """What to do with a run, from what its files say (:func:`debias_bench.runs.states.decide`)."""
    facts = run_dir.facts()
    state = effective_state(facts, owned=owned)
    died = clock_skew(facts) if state is RunState.DEAD else None
    return decide_state(state, facts.attempts, retry_failed, max_attempts, facts.fault, died)


def record_decision(run_dir: RunDir, decision: Decision, owned: bool = False) -> None:
    """Record what ``decision`` says the run's owner records (a dead run given up on is
    failed), so the sweep and ``bench status`` agree. ``owned``: the caller holds the lock."""
    if decision.record_failure is None:
        return
    with contextlib.nullcontext(True) if owned else run_dir.claim() as held:
        if held and run_dir.effective_state(owned=True) is RunState.DEAD:
            run_dir.transition(RunState.FAILED, reason=decision.record_failure, error=decision.note)


def run_one(
    config: RunConfig,
    store: RunStore,
    place: DataPlace,
    device: torch.device,
    progress: Progress | None = None,
    retry_failed: bool = False,
    should_stop: Callable[[int], bool] = lambda step: False,
    max_attempts: int = MAX_ATTEMPTS,
    status_fields: dict[str, Any] | None = None,
    track: Sequence[TrackSpec] = (),
) -> Outcome:
    """Run (or resume, or skip) one run in this process; see the module docstring.

    ``status_fields`` are recorded in ``status.json`` when the run starts (the worker's GPU,
    thread count, SLURM job id); ``track``: the experiment trackers it is sent to. Raises
    :class:`Interrupted` after checkpointing when ``should_stop`` asked for it."""
    run_dir = store.run(config.run_id)
    if run_dir.is_done():
        return Outcome(config, run_dir, RunState.DONE, "already done", run_dir.result())
    with run_dir.claim() as owned:
        if not owned:
            return Outcome(config, run_dir, RunState.RUNNING, "running in another process")
        try:
            run_dir.plan(config_json(config))  # a deleted config.json: its id is its hash
            decision = decide(run_dir, retry_failed, max_attempts, owned=True)
            if not decision.run and decision.state is RunState.DONE:
                return Outcome(config, run_dir, RunState.DONE, decision.note, run_dir.result())
            record_decision(run_dir, decision, owned=True)
            if not decision.run:
                return Outcome(config, run_dir, decision.state, decision.note)
            if decision.state is RunState.STALE:
                why = run_dir.staleness() or RunState.STALE.value
                aside = run_dir.retire()
                print(f"{config.run_id}: {why}; its files moved to {aside}, retraining",
                      file=sys.stderr, flush=True)  # fmt: skip
            tracking = RunTracking(list(track), run_dir, experiment_name(store.root))
            tracking.start()
            try:
                return _execute(
                    config,
                    run_dir,
                    place,
                    device,
                    progress,
                    should_stop,
                    decision,
                    status_fields or {},
                    tracking,
                )
            finally:
                tracking.finish()  # the state the run recorded, even when interrupted
        except OSError as exc:  # writing the store failed outside the training (a full disk)
            message = _record_failure(run_dir, exc)
            return Outcome(config, run_dir, RunState.FAILED, message, ran=True)


def _record_failure(run_dir: RunDir, exc: BaseException, **fields: Any) -> str:
    """Record ``exc`` as the run's failure, with its reason (:func:`classify`); returns the
    message. The caller holds the lock. Removes the run's temporary files first (room on a
    full disk); if status.json cannot be written either, says so in the message (the run
    then shows as dead, and a rerun resumes it)."""
    reason, message, extra = classify(exc)
    run_dir.remove_temp_files()
    try:
        run_dir.transition(
            RunState.FAILED, reason=reason, error=message, ended=time.time(), **extra, **fields
        )
    except OSError as again:
        message += f" (status.json not updated: [Errno {again.errno}] {again.strerror})"
    return message


def _record(run_dir: RunDir, state: RunState, **fields: Any) -> None:
    """Record a state on the way out of a run (interrupted): best effort, a full disk must
    not hide the interruption."""
    with contextlib.suppress(OSError):
        run_dir.transition(state, ended=time.time(), **fields)


def _execute(
    config: RunConfig,
    run_dir: RunDir,
    place: DataPlace,
    device: torch.device,
    progress: Progress | None,
    should_stop: Callable[[int], bool],
    decision: Decision,
    status_fields: dict[str, Any],
    tracking: RunTracking,
) -> Outcome:
    """Train the run; the caller holds its lock."""
    from debias_bench.training.engine import train_run  # torch: a sweep's plan needs none

    method_cls = METHODS.get(config.method)
    reason = method_cls.skip(DATASETS.get(config.dataset).spec, config.hparams)
    if reason:
        run_dir.transition(RunState.SKIPPED, reason=reason)
        return Outcome(config, run_dir, RunState.SKIPPED, reason)
    _start(run_dir, decision, device, status_fields)
    with Heartbeat(run_dir):
        try:
            recorded = _Recorded(run_dir, progress, tracking)
            with exits_raise():
                result = train_run(config, run_dir, place, device, recorded, should_stop)
        except Interrupted as exc:
            _record(run_dir, RunState.INTERRUPTED, note=str(exc))
            raise
        except KeyboardInterrupt as exc:  # a second stop signal to an inline sweep says why
            _record(run_dir, RunState.INTERRUPTED, note=str(exc) or KEYBOARD_NOTE)
            raise
        except (SystemExit, Exception) as exc:  # sys.exit() in method or dataset code too
            message = _record_crash(run_dir, exc)
            return Outcome(config, run_dir, RunState.FAILED, message, ran=True)
    note = ""
    try:
        run_dir.transition(RunState.DONE, exit_code=0, ended=time.time())
    except OSError as exc:  # the result is complete and readable: the run is done
        note = f"status.json not updated: [Errno {exc.errno}] {exc.strerror}"
    return Outcome(config, run_dir, RunState.DONE, note, result, ran=True)


def _start(
    run_dir: RunDir, decision: Decision, device: torch.device, status_fields: dict[str, Any]
) -> None:
    """Clear what an earlier attempt left, and record the run as running (a new attempt
    unless it resumes a requested stop)."""
    run_dir.remove_temp_files()  # left by a process that died mid-write
    if not run_dir.checkpoint_path.is_file():
        run_dir.truncate_metrics(0)  # from scratch: records of an earlier attempt would repeat
    previous = run_dir.status()
    attempt = int(previous.get("attempt", 0)) + int(decision.new_attempt)
    run_dir.transition(
        RunState.RUNNING,
        attempt=attempt,
        provenance=provenance(),  # the code that trains it (config.json: the code that planned)
        device=str(device),
        started=time.time(),
        first_started=previous.get("first_started") or time.time(),
        resumed_from=None,
        steps_per_s=None,  # the pace of the start before, until this one's steps are timed
        eta_s=None,
        note=decision.note,
        error=None,
        errno=None,
        exit_code=None,
        signal=None,
        traceback_tail=None,
        stderr_tail=None,
        **status_fields,
    )


def _record_crash(run_dir: RunDir, exc: BaseException) -> str:
    """Record an exception that ended the training as the run's failure; returns the message.

    A named failure (diverged, corrupt data, ...) says all in its message; a crash keeps the
    end of its traceback for ``bench status --failed``; a ``sys.exit()`` in the run's code is
    a crash that says so."""
    tail = "".join(traceback.format_exception(exc)[-6:])
    if isinstance(exc, SystemExit):
        call = "os._exit" if isinstance(exc, ExitCalled) else "sys.exit"
        why = f"the run's code called {call}({exc.code!r}) during the run"
        return _record_failure(
            run_dir, RunFailure(FailReason.CRASHED, why), traceback_tail=tail, exit_code=1
        )
    named = isinstance(exc, BenchError)
    return _record_failure(run_dir, exc, traceback_tail=None if named else tail, exit_code=1)


class _Recorded(Progress):
    """Forwards to the caller's progress, records where the run (re)started, gives the
    run's heartbeat its live progress (step, steps/s, ETA: :class:`Pace`) from the first
    step on, and sends each evaluation to the run's trackers."""

    def __init__(self, run_dir: RunDir, inner: Progress | None, tracking: RunTracking) -> None:
        self.run_dir, self.inner, self.tracking = run_dir, inner or Progress(), tracking
        self.pace = Pace()

    def start(self, run_id: str, total_steps: int, start_step: int) -> None:
        self.pace = Pace(total_steps, start_step)
        self.run_dir.heartbeat(resumed_from=start_step, **self.pace.fields())
        self.inner.start(run_id, total_steps, start_step)

    def advance(self, step: int) -> None:
        if self.pace.advance(step):
            Heartbeat.report(self.run_dir, self.pace.fields)
        self.inner.advance(step)

    def evaluated(self, record: dict[str, Any]) -> None:
        self.tracking.record(record)
        self.inner.evaluated(record)

    def close(self) -> None:
        Heartbeat.report(self.run_dir, None)
        with contextlib.suppress(Exception):  # where it stopped (an interruption), for status
            self.run_dir.heartbeat(**self.pace.fields())
        self.inner.close()


def plan(store: RunStore, configs: list[RunConfig]) -> int:
    """Give every run of a sweep that has no directory yet its ``config.json`` and a
    ``pending`` status, so ``bench status`` counts it from the start; returns how many.

    A run whose ``config.json`` was deleted gets it back (its id is the hash of that config)
    and keeps its status. A run that cannot be written (a full disk) is left to
    :func:`run_one`, which records the failure."""
    planned = 0
    for config in configs:
        run_dir = store.run(config.run_id)
        if run_dir.config_path.is_file():
            continue
        try:
            with run_dir.claim(wait_s=0) as owned:
                planned += bool(owned and run_dir.plan(config_json(config)))
        except OSError:
            continue
    return planned


def record_submission(run_dir: RunDir, job_id: str) -> None:
    """Note the cluster job a run was submitted as (``bench status`` asks the queue about it),
    unless the job already started the run (it then records its own id)."""
    with run_dir.claim() as owned:
        if not owned or run_dir.fault():
            return  # a corrupt run is not submitted (``decide``); never write over its files
        status = run_dir.status()
        state = parse_state(status.get("state"))
        started_by_it = status.get("slurm_job_id") == job_id
        if state is not RunState.RUNNING and not run_dir.is_done() and not started_by_it:
            run_dir.transition(state, submitted_job_id=job_id)


def record_not_started(run_dir: RunDir, config: RunConfig, error: str, **extra: Any) -> str:
    """A run whose cluster job or task ended before the run started: ``failed``
    (``not_started``) when no live process holds it, with ``extra`` fields (the job id, its log's
    tail); the error its status now records."""
    with run_dir.claim() as owned:
        if owned:
            run_dir.plan(config_json(config))
            run_dir.transition(
                RunState.FAILED,
                reason=FailReason.NOT_STARTED,
                error=error,
                exit_code=None,
                ended=time.time(),
                **extra,
            )
    return str(run_dir.status().get("error", ""))


def worker_identity() -> dict[str, Any]:
    """Where this process runs, for status.json (host and pid are added by RunDir.transition)."""
    import torch  # here, not at the top: building a sweep needs no torch

    out: dict[str, Any] = {"threads": torch.get_num_threads()}
    job = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if all(job):
        out["slurm_job_id"] = f"{job[0]}_{job[1]}"
    elif os.environ.get("SLURM_JOB_ID"):
        out["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    return out
