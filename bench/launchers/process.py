"""The launcher's handle on a worker process (:class:`WorkerProcess`) and the record of its
exit (:func:`record_exit`).

The parent sends the worker's stdout and stderr to ``stdout.log`` / ``stderr.log`` in the run
directory, enforces the timeout (SIGTERM, then SIGKILL after a grace period) and, once the
worker has exited, records the exit code and the tail of stderr, including for a worker that
could not record anything itself (killed by a signal, crashed, timed out).
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from debias_bench.config.run_config import RunConfig
from debias_bench.errors import FailReason
from debias_bench.runs.provenance import config_json
from debias_bench.runs.states import RunState, parse_state
from debias_bench.runs.store import RunStore

from .forkserver import available, fork_warm
from .job import EXIT_BUSY, EXIT_NOT_RUN, WorkerJob, die_with_parent
from .scheduler import Ended, Task
from .worker import forked_main

if TYPE_CHECKING:
    from debias_bench.runs.run_dir import RunDir

#: how long a worker may take to start its run (import, plugins) on top of --timeout
STARTUP_ALLOWANCE_S = 300.0


def signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _server_death(pid: int | None) -> str | None:
    """How the warm worker server ``pid`` (a child of this process) ended: ``SIGKILL``,
    ``exit code 1``, or ``ended`` when it was already reaped (a new server replaced it);
    None while it runs. It is left to be reaped by ``multiprocessing`` (``WNOWAIT``)."""
    if pid is None:
        return None
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return "ended"
    if info is None:
        return None
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return signal_name(-info.si_status)
    return f"exit code {info.si_status}"


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


#: what ``multiprocessing`` reports as the exit code of a process whose fork server died
#: before it could pass the real one on
SERVER_LOST = 255


class _Forked:
    """A warm worker (a ``multiprocessing`` process) behind the part of ``Popen``'s interface
    the launchers use: ``pid``, ``poll``, ``wait``, ``terminate``, ``kill``.

    Its parent is the warm server, which reports its exit. When the server dies first (killed,
    the OOM killer), the worker gets SIGTERM (``PR_SET_PDEATHSIG``) and checkpoints; it is
    watched through its pidfd until it has ended (``server_died`` says how the server
    ended), so that its run is recorded after it, never while it still writes."""

    live: ClassVar[set[_Forked]] = set()

    def __init__(self, job: WorkerJob, env: dict[str, str], stdout: Path, stderr: Path) -> None:
        from multiprocessing import forkserver as mp_forkserver

        lifeline, self._lifeline = multiprocessing.Pipe(duplex=False)  # held until it ends
        args = (job.to_json(), env, str(stdout), str(stderr), lifeline)
        self.process = fork_warm(forked_main, args, f"worker-{job.run_id}", job.plugins)
        lifeline.close()
        self.server_pid: int | None = getattr(
            getattr(mp_forkserver, "_forkserver", None), "_forkserver_pid", None
        )
        #: how the warm server died while this worker ran; None if it did not
        self.server_died: str | None = None
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # Linux >= 5.3; gone already
            self._pidfd = os.pidfd_open(self.pid)
        _Forked.live.add(self)

    @property
    def pid(self) -> int:
        return int(self.process.pid or 0)

    def _orphan_alive(self) -> bool:
        """Whether the worker, no longer the server's child, still runs."""
        if self._pidfd is not None:
            return not select.select([self._pidfd], [], [], 0)[0]
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def poll(self) -> int | None:
        code = self.process.exitcode
        if code == SERVER_LOST and self.server_died is None:
            self.server_died = _server_death(self.server_pid)
        if code is None or (self.server_died is not None and self._orphan_alive()):
            return None
        if self in _Forked.live:
            _Forked.live.discard(self)
            self._lifeline.close()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return code

    def wait(self) -> int:
        while (code := self.poll()) is None:
            self.process.join(0.1)
            if self.server_died is not None:
                time.sleep(0.1)
        return code

    def _signal(self, sig: int) -> None:
        if self.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            if self.server_died is not None and self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, sig)  # not the server's child any more
            else:
                os.kill(self.pid, sig)  # what Process.terminate() and kill() do

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)


@atexit.register
def _stop_forked_workers() -> None:
    """A cold worker gets SIGTERM when its ``bench`` process dies; a warm one too, here,
    before ``multiprocessing`` waits for its children at exit."""
    for forked in list(_Forked.live):
        forked.terminate()


class WorkerProcess:
    """A running worker: start (warm or cold), poll with a timeout, stop, record its exit.

    ``warm``: fork it from the warm server (:mod:`.forkserver`), where the platform allows."""

    def __init__(
        self,
        job: WorkerJob,
        env: dict[str, str],
        timeout_s: float | None = None,
        grace_s: float = 30.0,
        warm: bool = False,
    ) -> None:

        self.job, self.timeout_s, self.grace_s = job, timeout_s, grace_s
        self.run_dir = RunStore(Path(job.out)).run(job.run_id)
        self.run_dir.path.mkdir(parents=True, exist_ok=True)
        self.warm = warm and available()
        with self.run_dir.open_log(self.run_dir.stderr_path) as log:
            self.offset = log.tell()
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            how = "warm" if self.warm else "cold"
            log.write(f"==== {stamp} {how} worker started by {socket.gethostname()}\n".encode())
        self.started = time.monotonic()
        self.oom_kills = oom_kills()  # more after a SIGKILL: the OOM killer's (record_exit)
        self.run_started: float | None = None  # when the worker took the run (its lock)
        self.timed_out = False
        self._term_at: float | None = None
        self.proc: Any
        if self.warm:
            self.proc = _Forked(job, env, self.run_dir.stdout_path, self.run_dir.stderr_path)
            return
        with (
            self.run_dir.open_log(self.run_dir.stdout_path) as stdout,
            self.run_dir.open_log(self.run_dir.stderr_path) as stderr,
        ):
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "debias_bench.launchers.worker"],
                stdin=subprocess.PIPE,
                stdout=stdout,
                stderr=stderr,
                env=env,
                preexec_fn=die_with_parent,  # a run dies with its launcher
            )
        assert self.proc.stdin is not None
        self.proc.stdin.write(job.to_json().encode())
        self.proc.stdin.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def server_died(self) -> str | None:
        """How the warm server of this worker died while it ran (None: it did not)."""
        return getattr(self.proc, "server_died", None)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _over_time(self) -> bool:
        """``timeout_s`` counts from when the worker started the run (interpreter start and
        imports excluded); a worker gets ``STARTUP_ALLOWANCE_S`` more to get there."""
        if self.run_started is None:
            try:
                status = self.run_dir.status()
            except Exception:  # a foreign or unreadable file: keep the spawn clock
                status = {}
            if status.get("pid") == self.proc.pid and status.get("state") == RunState.RUNNING:
                self.run_started = time.monotonic()
        if self.timeout_s is None:
            return False
        if self.run_started is not None:
            return time.monotonic() - self.run_started > self.timeout_s
        return self.elapsed() > self.timeout_s + STARTUP_ALLOWANCE_S

    def poll(self) -> int | None:
        """The exit code once it has exited; enforces the timeout on the way."""
        code = self.proc.poll()
        if code is not None:
            return code
        if self.server_died and self._term_at is None:  # it got SIGTERM when the server died
            self._term_at = time.monotonic()
        if self.timeout_s and self._term_at is None and self._over_time():
            self.timed_out = True
            self.terminate()
        if self._term_at is not None and time.monotonic() - self._term_at > self.grace_s:
            self.proc.kill()
        return None

    def terminate(self) -> None:
        """Ask it to checkpoint and exit (SIGKILL follows after ``grace_s``)."""
        if self._term_at is None and self.proc.poll() is None:
            self._term_at = time.monotonic()
            self.proc.terminate()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self) -> int:
        while (code := self.poll()) is None:
            time.sleep(0.1)
        return code

    def ended(self, task: Task) -> Ended:
        """Record the exit (after it has exited) and say how ``task`` ended, for the sweep."""
        state = self.finish()
        status = self.run_dir.status()
        note = status.get("error") or status.get("reason") or ""
        if state in (RunState.INTERRUPTED, RunState.PENDING):  # why (and where it resumes)
            note = status.get("note") or note
        return Ended(task, state, note, ran=state is not RunState.RUNNING)  # running: held

    def finish(self) -> RunState:
        """Record the exit (after it has exited); returns the run's state."""
        code = self.proc.wait()
        before, after = self.oom_kills, oom_kills() if code == -signal.SIGKILL else None
        return record_exit(
            self.run_dir,
            self.job.config,
            code,
            self.run_dir.log_tail(self.offset),
            pid=self.proc.pid,
            timeout_s=self.timeout_s if self.timed_out else None,
            server_died=self.server_died,
            oom_killed=before is not None and after is not None and after > before,
        )


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
