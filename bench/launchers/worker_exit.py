"""How a worker's exit is told and recorded (:func:`record_exit`): its exit code or signal, an
OOM kill (:func:`oom_kills`), and the outcome of a worker that could not record it itself
(killed by a signal, crashed, timed out, its warm server gone), written to the run's
``status.json`` by the process that started it (its
:class:`~debias_bench.launchers.process.WorkerProcess`)."""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debias_bench.config.run_config import RunConfig
from debias_bench.errors import FailReason
from debias_bench.runs.provenance import config_json
from debias_bench.runs.states import RunState, parse_state

from .job import EXIT_BUSY, EXIT_NOT_RUN

if TYPE_CHECKING:
    from debias_bench.runs.run_dir import RunDir


def signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def oom_kills(
    cgroups: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
) -> int | None:
    """How many processes the OOM killer has killed in this process's memory cgroup (the
    workers' too: they inherit it), from ``oom_kill`` in cgroup v2's ``memory.events`` or v1's
    ``memory.oom_control``; None where neither can be read (then a SIGKILL tells nothing)."""
    try:
        lines = cgroups.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            places, name = [root / path.lstrip("/"), root], "memory.events"
        elif "memory" in controllers.split(","):
            places, name = (
                [root / "memory" / path.lstrip("/"), root / "memory"],
                "memory.oom_control",
            )
        else:
            continue
        for folder in places:  # in a container its own cgroup is the mount's root
            with contextlib.suppress(OSError, ValueError):
                for entry in (folder / name).read_text().splitlines():
                    key, _, value = entry.partition(" ")
                    if key == "oom_kill":
                        return int(value)
    return None


def record_exit(
    run_dir: RunDir,
    config: dict[str, Any],
    returncode: int,
    stderr_tail: str,
    pid: int | None = None,
    timeout_s: float | None = None,
    server_died: str | None = None,
    oom_killed: bool = False,
) -> RunState:
    """Record a finished worker's exit code and stderr tail in ``status.json``, and the outcome
    of a worker that could not record it: timed out, or failed when it never started the run,
    dead when it died during the run (killed, crashed). Returns the run's state.

    Called by the process that started the worker (whose pid is ``pid``), after it exited; it
    takes the run's lock, so it never writes over a run that another live process owns.
    ``config``: the run's ``RunConfig.to_json()``. ``server_died``: how the warm server that
    started the worker died while it ran (its exit code is then unknown, and the run's note
    or error says so). ``oom_killed``: the OOM killer killed a process of the worker's cgroup
    while it ran (:func:`oom_kills`): a SIGKILL during the run is then ``failed (out of
    memory)``, not ``dead`` (a plain rerun would be killed the same way)."""

    if returncode == EXIT_BUSY:
        return RunState.RUNNING
    with run_dir.claim() as owned:
        if not owned:
            return run_dir.effective_state()
        if run_dir.is_done():
            return RunState.DONE
        if run_dir.fault():
            return RunState.CORRUPT  # never write over a foreign or unreadable record
        status = run_dir.status()
        state = parse_state(status.get("state"))
        if returncode == EXIT_NOT_RUN or (state is RunState.SKIPPED and returncode == 0):
            return state
        fields: dict[str, Any] = {
            "exit_code": returncode,
            "signal": signal_name(returncode),
            "stderr_tail": stderr_tail,
            "ended": time.time(),
        }
        how = signal_name(returncode) or f"code {returncode}"
        if server_died is not None:  # its parent could not pass its exit code on
            fields.update(exit_code=None, signal=None)
            return _record_server_death(run_dir, state, status, server_died, fields)
        started = pid is None or status.get("pid") == pid
        reason = None
        if timeout_s is not None:
            stopped = "killed" if returncode == -signal.SIGKILL else "stopped"
            state, reason = RunState.FAILED, FailReason.TIMED_OUT
            fields["error"] = f"timed out after {timeout_s:g} s ({stopped})"
        elif not started and returncode != 0:
            lines = stderr_tail.strip().splitlines() or [""]
            last = next((line for line in reversed(lines) if "Error" in line), lines[-1])
            state, reason = RunState.FAILED, FailReason.NOT_STARTED
            fields["error"] = f"worker exited ({how}) before the run started: {last}"
        elif oom_killed and returncode == -signal.SIGKILL and state is RunState.RUNNING:
            state, reason = RunState.FAILED, FailReason.OUT_OF_MEMORY
            fields["error"] = (
                "out of memory: the OOM killer killed the worker (SIGKILL) during the run"
            )
        if not run_dir.config_path.is_file():  # deleted: plan it again, if it is this run
            planned = config_json(RunConfig.from_json(config))
            if planned["run_id"] == run_dir.run_id:  # not when this code hashes it elsewhere
                run_dir.plan(planned)
        if state is RunState.RUNNING and "error" not in fields:
            # It died without recording an outcome (kill -9, the OOM killer, a crash of the
            # interpreter): dead, as when an inline sweep dies, and a plain rerun resumes it.
            run_dir.mark_dead(f"worker died ({how}) during the run; a rerun resumes it", **fields)
            return RunState.DEAD
        run_dir.transition(state, reason=reason, **fields)
        return state


def _record_server_death(
    run_dir: RunDir,
    state: RunState,
    status: dict[str, Any],
    server_died: str,
    fields: dict[str, Any],
) -> RunState:
    """Record a run whose warm worker server died while it ran (the caller holds the lock):
    the worker was told to checkpoint and stop, so it is ``interrupted`` (resumes, not a new
    attempt), with the reason in its note; ``dead`` if it died without recording that."""
    why = f"the worker server died ({server_died}) during the run"
    if state is RunState.RUNNING:
        run_dir.mark_dead(f"{why} and took its worker along; a rerun resumes it", **fields)
        return RunState.DEAD
    if state is RunState.INTERRUPTED:
        fields["note"] = f"{why}; {status.get('note') or 'a rerun resumes it'}"
    elif state is RunState.PENDING:
        fields["note"] = f"the worker server died ({server_died}) before the run started"
    run_dir.transition(state, **fields)
    return state
