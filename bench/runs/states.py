"""Run states, failure reasons, and the transitions between them, decided in one place.

A run's state is recorded in its ``status.json`` by whoever owns it (see
:mod:`debias_bench.runs.store`), but what a reader or a sweep should *believe* also depends on facts
outside that file: whether ``result.json`` holds a complete, finite result, whether any of the
run's JSON files is unreadable, and whether the process that claims to run it is still alive.
:func:`effective_state` turns those facts (gathered by :meth:`RunDir.facts
<debias_bench.runs.run_dir.RunDir.facts>`) into one :class:`RunState`; :func:`decide` says what a
sweep
does with a run in that state. Both are pure functions: no file is read here.

``done`` means a finite, complete result and nothing else: a ``status.json`` that says done
without a readable result is not done, and a run with an unreadable file is ``corrupt``.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from enum import Enum
from typing import Any

from debias_bench.errors import BenchError, FailReason, RunFailure


class RunState(str, Enum):
    """What a run is; a ``str`` so that JSON and comparisons with plain strings keep working."""

    PENDING = "pending"  # planned, not started (or its result was moved aside)
    RUNNING = "running"  # a live process owns it
    DONE = "done"  # a finite, complete result.json
    FAILED = "failed"  # ended without a result; ``reason`` says why (a FailReason)
    INTERRUPTED = "interrupted"  # stopped on request (signal, preemption); resumable
    DEAD = "dead"  # recorded as running, but its process is gone; resumable
    CORRUPT = "corrupt"  # one of its JSON files is unreadable; the note names it and the fix
    STALE = "stale"  # trained (or checkpointed) by other code of its method or dataset
    SKIPPED = "skipped"  # its method declined the dataset/config, with a reason

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


#: the states in which a run counts as finished successfully (``bench run`` exits 0)
SUCCESS = frozenset({RunState.DONE, RunState.SKIPPED})
#: how a sweep's progress line and ``bench status`` count a state (a skip is finished, an
#: interruption is still to do)
COUNTED_AS = {RunState.SKIPPED: RunState.DONE, RunState.INTERRUPTED: RunState.PENDING}
#: the states that a rerun resumes without being asked
RESUMABLE = frozenset({RunState.PENDING, RunState.INTERRUPTED, RunState.DEAD})


#: the changes of recorded state a run may make: stored state -> states it may move to.
#: ``corrupt`` is never recorded (it is what a reader finds); a ``done`` run never changes.
LEGAL: dict[RunState, frozenset[RunState]] = {
    RunState.PENDING: frozenset(
        {RunState.PENDING, RunState.RUNNING, RunState.SKIPPED, RunState.FAILED}
    ),
    RunState.RUNNING: frozenset(
        {
            RunState.RUNNING,  # a restart over a dead process's status
            RunState.DONE,
            RunState.FAILED,
            RunState.INTERRUPTED,
            RunState.SKIPPED,
            RunState.DEAD,
        }
    ),
    RunState.DEAD: frozenset({RunState.DEAD, RunState.RUNNING, RunState.FAILED}),
    RunState.INTERRUPTED: frozenset(
        {RunState.INTERRUPTED, RunState.RUNNING, RunState.FAILED, RunState.SKIPPED}
    ),
    RunState.FAILED: frozenset({RunState.FAILED, RunState.RUNNING, RunState.SKIPPED}),
    RunState.SKIPPED: frozenset({RunState.SKIPPED, RunState.RUNNING, RunState.PENDING}),
    RunState.DONE: frozenset({RunState.DONE}),
    RunState.CORRUPT: frozenset(),
    RunState.STALE: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A state change that :data:`LEGAL` does not allow: a bug in bench, not a user error."""


def check_transition(stored: RunState, target: RunState, has_result: bool) -> None:
    """Raise IllegalTransition unless a run recorded as ``stored`` may move to ``target``;
    ``done`` needs a verified result (``has_result``), and a run that has one stays done."""
    if target is RunState.DONE and not has_result:
        raise IllegalTransition("a run is done only with a complete, verified result.json")
    if has_result and target is not RunState.DONE:
        raise IllegalTransition(f"a done run cannot become {target}")
    if target not in LEGAL[stored]:
        raise IllegalTransition(f"a {stored} run cannot become {target}")


def parse_state(value: Any) -> RunState:
    """The state recorded in a ``status.json`` (``pending`` when none was recorded)."""
    if value is None:
        return RunState.PENDING
    state = RunState(value)  # ValueError for a foreign value: the caller calls it corrupt
    if state in (RunState.CORRUPT, RunState.STALE):
        raise ValueError(f"{state} is found by readers, never recorded")
    return state


def failure_reason(status: dict[str, Any]) -> FailReason | None:
    """The reason of a failed run; older stores recorded only ``error`` text, read here."""
    if status.get("state") != RunState.FAILED:
        return None
    try:
        return FailReason(status.get("reason"))
    except ValueError:
        pass
    error = str(status.get("error") or "")
    if error.startswith("timed out"):
        return FailReason.TIMED_OUT
    if "worker died (SIG" in error:
        return FailReason.KILLED
    if "No space left" in error:
        return FailReason.DISK_FULL
    return FailReason.CRASHED


_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


#: what torch's allocators say when memory runs out: "CUDA out of memory" (and MPS's, XPU's:
#: ``torch.OutOfMemoryError``, a RuntimeError), "CUDA error: out of memory" from a kernel, and
#: the CPU allocator's "can't allocate memory" (a plain RuntimeError)
_OUT_OF_MEMORY_TEXT = ("out of memory", "can't allocate memory")


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says memory ran out: Python's MemoryError, ENOMEM, torch's
    ``OutOfMemoryError`` (known by name: this module imports no torch) or a RuntimeError of a
    torch allocator that says so."""
    if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
        return True
    if any(cls.__name__ == "OutOfMemoryError" for cls in type(exc).__mro__):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(t in text for t in _OUT_OF_MEMORY_TEXT)


def classify(exc: BaseException) -> tuple[FailReason, str, dict[str, Any]]:
    """(reason, message, extra status fields) for an exception that ended a run."""
    if isinstance(exc, RunFailure):
        return exc.reason, str(exc), dict(exc.fields)
    if out_of_memory(exc):
        first = (str(exc).strip().splitlines() or [""])[0]
        return FailReason.OUT_OF_MEMORY, f"out of memory: {type(exc).__name__}: {first}", {}
    if isinstance(exc, OSError) and exc.errno is not None:
        path = exc.filename or "the run store"
        text = f"cannot write {path}: [Errno {exc.errno}] {exc.strerror}"
        if exc.errno in _DISK_FULL:
            return FailReason.DISK_FULL, f"disk full: {text}", {"errno": exc.errno}
        if getattr(exc, "store_write", False):
            return FailReason.WRITE_ERROR, text, {"errno": exc.errno}
    message = str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
    return FailReason.CRASHED, message, {}


# ---------------------------------------------------------------------------- the decision
@dataclass(frozen=True)
class Facts:
    """What the run store says about one run, gathered by ``RunDir.facts`` (no decisions)."""

    stored: RunState  # the state in status.json (PENDING when there is none)
    result_ok: bool  # result.json holds a complete, finite result
    fault: str | None = None  # an unreadable file, and the fix (the run is corrupt)
    stale: str | None = None  # what changed in the code since its result or checkpoint
    attempts: int = 0
    same_host: bool = True  # status.json was written on this host
    heartbeat_age_s: float = 0.0  # this host's clock less the writer's, at its last beat
    #: how long ago ``status.json`` was last written, by this host's clock (its mtime; None
    #: when unknown): what judges a heartbeat from the future (:func:`heartbeat_stale`)
    written_age_s: float | None = None
    lock_held: bool | None = None  # None: the lock cannot be told (no lock file, no flock)
    pid_alive: bool = False


#: how often a live run refreshes its heartbeat (a thread, ``store.Heartbeat``)
HEARTBEAT_EVERY_S = 30.0
#: a running run whose heartbeat is older than this is reported as dead (another host)
STALE_AFTER_S = 10 * HEARTBEAT_EVERY_S


def clock_skew(facts: Facts) -> str | None:
    """Why the run's heartbeat is not believed: it is more than :data:`STALE_AFTER_S` ahead of
    this host's clock (the clock of the host that wrote it is fast); None when it is not."""
    if facts.heartbeat_age_s >= -STALE_AFTER_S:
        return None
    written = facts.written_age_s
    unwritten = "?" if written is None else f"{written:.0f}"
    return (
        f"its heartbeat is {-facts.heartbeat_age_s:.0f} s ahead of this host's clock, a clock "
        f"skew: status.json unwritten for {unwritten} s here (dead after {STALE_AFTER_S:.0f} s)"
    )


def heartbeat_stale(facts: Facts) -> bool:
    """Whether a ``running`` run's heartbeat says its process is gone: older than
    :data:`STALE_AFTER_S`. A heartbeat further ahead of this host's clock than that (another
    host whose clock is fast) is not trusted, or a dead run would wait until this clock caught
    up (forever, for a clock years ahead): then how long ``status.json`` has gone unwritten,
    as seen from here, decides, and any time beyond the bound either way is stale."""
    if clock_skew(facts) is None:
        return facts.heartbeat_age_s > STALE_AFTER_S
    return facts.written_age_s is None or abs(facts.written_age_s) > STALE_AFTER_S


def effective_state(facts: Facts, owned: bool = False) -> RunState:
    """The one state a run is in, whoever asks.

    An unreadable file makes it corrupt; a complete result makes it done; a status that says
    done without one is pending again. A ``running`` run whose process is gone is dead: on this
    host its lock decides (the pid when the lock cannot be told); on another host a stale
    heartbeat (:func:`heartbeat_stale`). ``owned``: the caller holds the lock itself, so a
    ``running`` status on this host is a leftover of a dead process."""
    if facts.fault:
        return RunState.CORRUPT
    if facts.stale and facts.stored is not RunState.RUNNING:
        return RunState.STALE
    if facts.result_ok:
        return RunState.DONE
    if facts.stored is RunState.DONE:
        return RunState.PENDING
    if facts.stored is not RunState.RUNNING:
        return facts.stored
    stale = heartbeat_stale(facts)
    if not facts.same_host:
        return RunState.DEAD if stale else RunState.RUNNING
    if owned:
        return RunState.DEAD
    if facts.lock_held is None:
        return RunState.DEAD if stale or not facts.pid_alive else RunState.RUNNING
    return RunState.RUNNING if facts.lock_held else RunState.DEAD


@dataclass(frozen=True)
class Decision:
    """What a sweep does with a run: train it (``run``), or report it as ``state``."""

    run: bool
    state: RunState
    note: str = ""
    new_attempt: bool = True  # False when resuming a requested stop
    #: when set, the run's owner records it as failed with this reason (it gave up on it)
    record_failure: FailReason | None = None


def decide(
    state: RunState,
    attempts: int,
    retry_failed: bool,
    max_attempts: int,
    fault: str | None = None,
    died: str | None = None,
) -> Decision:
    """What to do with a run in ``state`` after ``attempts`` starts; ``died``: how a dead run
    was found dead, when its note should say (:func:`clock_skew`)."""
    if state is RunState.DONE:
        return Decision(False, state, "already done")
    if state is RunState.CORRUPT:
        return Decision(False, state, fault or "an unreadable file")
    if state is RunState.STALE:  # its owner moves the old files aside first (RunDir.retire)
        return Decision(True, state, "its code changed since it ran: retraining")
    if state is RunState.RUNNING:
        return Decision(False, state, "running in another process")
    if state is RunState.FAILED:
        if not retry_failed:
            return Decision(False, state, "failed before; pass --retry-failed to rerun")
        if attempts >= max_attempts:
            return Decision(False, state, f"gave up after {attempts} attempts (--max-attempts)")
        return Decision(True, state, f"retry {attempts + 1}/{max_attempts}")
    if state is RunState.DEAD:
        gone = f"its process died ({died})" if died else "its process died"
        if attempts >= max_attempts:
            note = f"{gone}; gave up after {attempts} attempts"
            return Decision(False, RunState.FAILED, note, record_failure=FailReason.DIED)
        return Decision(True, state, f"{gone}; resuming from the checkpoint")
    if state is RunState.INTERRUPTED:
        return Decision(True, state, "resuming", new_attempt=False)
    return Decision(True, state)  # pending, skipped (re-asked: the method may have changed)
