"""The launcher's handle on a worker process (:class:`WorkerProcess`), started cold or forked
warm (:class:`_Forked`).

The parent sends the worker's stdout and stderr to ``stdout.log`` / ``stderr.log`` in the run
directory, enforces the timeout (SIGTERM, then SIGKILL after a grace period) and, once the
worker has exited, records the exit code and the tail of stderr, including for a worker that
could not record anything itself (killed by a signal, crashed, timed out): the record of its
exit is :func:`~debias_bench.launchers.worker_exit.record_exit`.
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
from typing import Any, ClassVar

from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

from .forkserver import available, fork_warm
from .job import WorkerJob, die_with_parent
from .scheduler import Ended, Task
from .worker import forked_main
from .worker_exit import oom_kills, record_exit, signal_name

#: how long a worker may take to start its run (import, plugins) on top of --timeout
STARTUP_ALLOWANCE_S = 300.0


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


#: what ``multiprocessing`` reports as the exit code of a process whose fork server died
#: before it could pass the real one on
SERVER_LOST = 255
#: how long a ``SERVER_LOST`` code waits for the server's death to be readable
SERVER_WAIT_S = 2.0


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
        self._lost_at: float | None = None  # when SERVER_LOST was first read
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
            if self.server_died is None and self._server_may_be_ending():
                return None
        if code is None or (self.server_died is not None and self._orphan_alive()):
            return None
        if self in _Forked.live:
            _Forked.live.discard(self)
            self._lifeline.close()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return code

    def _server_may_be_ending(self) -> bool:
        """Whether a ``SERVER_LOST`` exit code may still turn out to be the server's death:
        the server closes its pipe to this process before its own exit can be read
        (``waitid``), so for :data:`SERVER_WAIT_S` the code is taken for a dying server's,
        and after that for the worker's own exit code 255."""
        if self._lost_at is None:
            self._lost_at = time.monotonic()
        return time.monotonic() - self._lost_at < SERVER_WAIT_S

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

    @property
    def exit_handle(self) -> int | None:
        """A handle ``multiprocessing.connection.wait`` finds ready once the worker has
        exited: a warm worker's sentinel (None for a cold one, or once its server died: its
        exit is then watched through its pidfd)."""
        if not self.warm or self.server_died is not None or self.proc.process.exitcode is not None:
            return None  # (a known exit code: waiting on its sentinel would not wait)
        return int(self.proc.process.sentinel)

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
