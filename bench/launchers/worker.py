"""One run in its own process: the worker (``python -m debias_bench.launchers.worker``) and
the parent's handle on it (:class:`WorkerProcess`).

The worker reads a :class:`WorkerJob` as JSON on stdin, imports the plugin modules that
registered the run's method and dataset, and calls :func:`~debias_bench.sweep.run_one`, which
takes the run's lock and records its state. SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 (and the
death of its parent) make it checkpoint at the next step and exit with ``128 + signal``; the
run is then ``interrupted`` and resumes from its checkpoint when started again.

The parent sends stdout and stderr to ``stdout.log`` / ``stderr.log`` in the run directory,
enforces the timeout (SIGTERM, then SIGKILL after a grace period) and, once the worker has
exited, records the exit code and the tail of stderr with :func:`record_exit`, including for a
worker that could not record anything itself (killed by a signal, crashed, timed out).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from debias_bench.states import FailReason, RunState, parse_state

if TYPE_CHECKING:
    from debias_bench.store import RunDir

#: exit codes of the worker besides 0 (done or skipped) and 128 + signal (interrupted)
EXIT_FAILED = 1  # the run failed; run_one recorded the error
EXIT_NOT_RUN = 3  # not started: failed before and not to be retried
EXIT_BUSY = 75  # another live process owns the run (EX_TEMPFAIL)
#: how long a worker may take to start its run (import, plugins) on top of --timeout
STARTUP_ALLOWANCE_S = 300.0


@dataclass
class WorkerJob:
    """Everything a worker needs to run one run (JSON on its stdin)."""

    config: dict[str, Any]  # RunConfig.to_json()
    out: str
    raw_root: str
    data_root: str
    device: str = "cpu"  # as the worker sees it: "cuda" is its one visible GPU
    retry_failed: bool = False
    max_attempts: int = 3
    plugins: list[str] = field(default_factory=list)
    sys_path: list[str] = field(default_factory=list)
    status_fields: dict[str, Any] = field(default_factory=dict)
    #: experiment trackers, as ``TrackSpec.key`` (resolved by the sweep)
    track: list[str] = field(default_factory=list)
    #: the run id the sweep planned; the worker refuses a config that hashes to another one
    #: (the code or a method's defaults changed under the sweep)
    planned_id: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @property
    def run_id(self) -> str:
        if self.planned_id:
            return self.planned_id
        from debias_bench.config import RunConfig

        return RunConfig.from_json(self.config).run_id


# ------------------------------------------------------------------------------ worker side
def _watch_parent(stop: dict[str, int | None]) -> None:
    """Ask the run to stop when the parent dies (where PR_SET_PDEATHSIG is not available)."""
    parent = os.getppid()
    while stop["signal"] is None:
        if os.getppid() != parent:
            stop["signal"] = signal.SIGHUP
            return
        time.sleep(1.0)


def main() -> int:
    """The cold worker: a fresh interpreter that reads its job on stdin."""
    return run_job(WorkerJob(**json.load(sys.stdin)))


def _watch_lifeline(lifeline: Connection, stop: dict[str, int | None]) -> None:
    """Ask the run to stop when the launcher dies: its end of ``lifeline`` closes."""
    with contextlib.suppress(EOFError, OSError):
        lifeline.recv()
    stop["signal"] = signal.SIGHUP


def forked_main(
    job_json: str, env: dict[str, str], stdout: str, stderr: str, lifeline: Connection
) -> None:
    """The warm worker: a child of the fork server (:mod:`.forkserver`). It takes the
    environment a cold worker would have been given and sends its output to the run's logs,
    before anything reads them (CUDA, thread counts). Its parent is the fork server, which
    outlives a killed launcher while runs live: ``lifeline`` tells it the launcher died."""
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, stdout), (2, stderr)):
        target = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(target, fd)
        os.close(target)
    _die_with_parent()  # its parent is the fork server, which exits with the sweep
    try:
        code = run_job(WorkerJob(**json.loads(job_json)), lifeline)
    finally:
        end_children()
    sys.exit(code)


def end_children(grace_s: float = 5.0) -> int:
    """Stop the child processes a run left behind; returns how many. A forked worker's exit
    waits for its non-daemon children (``multiprocessing`` joins them, and no ``atexit`` hook
    runs to shut a pool down), so a plugin's idle process pool (joblib's lives 300 s) would
    hold the run's launcher slot after the run has ended and recorded its result."""
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace_s
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
    return len(children)


def run_job(job: WorkerJob, lifeline: Connection | None = None) -> int:
    """Run ``job`` in this process; returns the worker's exit code."""
    from debias_bench.launchers.plugins import import_plugins

    import_plugins(job.plugins, job.sys_path)
    import torch

    from debias_bench.config import RunConfig
    from debias_bench.engine import DataPlace, Interrupted
    from debias_bench.runprogress import LogLines
    from debias_bench.store import RunStore
    from debias_bench.sweep import run_one, worker_identity
    from debias_bench.tracking import TrackSpec

    threads = int(os.environ.get("BENCH_THREADS") or 0)
    if threads:
        torch.set_num_threads(threads)
    stop: dict[str, int | None] = {"signal": None}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["signal"] = signum

    # SIGUSR2: SLURM's warning before the time limit (submitit's --signal)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, on_signal)
    threading.Thread(target=_watch_parent, args=(stop,), daemon=True).start()
    if lifeline is not None:
        threading.Thread(target=_watch_lifeline, args=(lifeline, stop), daemon=True).start()

    config = RunConfig.from_json(job.config)
    print(f"worker {os.getpid()} on {socket.gethostname()}: {config.run_id}", file=sys.stderr)
    if job.planned_id and config.run_id != job.planned_id:
        print(
            f"RunIdError: this worker's code gives the run id {config.run_id}, the sweep planned "
            f"{job.planned_id}: the code or a method's defaults changed while the sweep ran; "
            "rerun the sweep",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        outcome = run_one(
            config,
            RunStore(Path(job.out)),
            DataPlace(Path(job.raw_root), Path(job.data_root)),
            torch.device(job.device),
            LogLines(f"{config.run_id}: "),
            retry_failed=job.retry_failed,
            should_stop=lambda step: stop["signal"] is not None,
            max_attempts=job.max_attempts,
            status_fields={**job.status_fields, **worker_identity()},
            track=[TrackSpec.parse(key) for key in job.track],
        )
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 128 + int(stop["signal"] or signal.SIGTERM)
    if outcome.state is RunState.FAILED and outcome.ran:  # the traceback, for the stderr tail
        print(outcome.run_dir.status().get("traceback_tail", ""), file=sys.stderr, end="")
    print(f"{config.run_id}: {outcome.state} {outcome.note}".rstrip(), file=sys.stderr)
    if outcome.state is RunState.RUNNING:
        return EXIT_BUSY
    if outcome.state is RunState.FAILED:
        return EXIT_FAILED if outcome.ran else EXIT_NOT_RUN
    return 0


# ------------------------------------------------------------------------------ parent side
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class _Forked:
    """A warm worker (a ``multiprocessing`` process) behind the part of ``Popen``'s interface
    the launchers use: ``pid``, ``poll``, ``wait``, ``terminate``, ``kill``."""

    live: ClassVar[set[_Forked]] = set()

    def __init__(self, job: WorkerJob, env: dict[str, str], stdout: Path, stderr: Path) -> None:
        from .forkserver import fork_warm

        lifeline, self._lifeline = multiprocessing.Pipe(duplex=False)  # held until it ends
        args = (job.to_json(), env, str(stdout), str(stderr), lifeline)
        self.process = fork_warm(forked_main, args, f"worker-{job.run_id}", job.plugins)
        lifeline.close()
        _Forked.live.add(self)

    @property
    def pid(self) -> int:
        return int(self.process.pid or 0)

    def poll(self) -> int | None:
        code = self.process.exitcode
        if code is not None and self in _Forked.live:
            _Forked.live.discard(self)
            self._lifeline.close()
        return code

    def wait(self) -> int:
        self.process.join()
        return int(self.poll())  # type: ignore[arg-type]

    def terminate(self) -> None:
        if self.poll() is None:
            self.process.terminate()

    def kill(self) -> None:
        if self.poll() is None:
            self.process.kill()


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
        from debias_bench.store import RunStore

        from .forkserver import available

        self.job, self.timeout_s, self.grace_s = job, timeout_s, grace_s
        self.run_dir = RunStore(Path(job.out)).run(job.run_id)
        self.run_dir.path.mkdir(parents=True, exist_ok=True)
        self.warm = warm and available()
        with open(self.run_dir.stderr_path, "ab") as log:
            self.offset = log.tell()
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            how = "warm" if self.warm else "cold"
            log.write(f"==== {stamp} {how} worker started by {socket.gethostname()}\n".encode())
        self.started = time.monotonic()
        self.run_started: float | None = None  # when the worker took the run (its lock)
        self.timed_out = False
        self._term_at: float | None = None
        self.proc: Any
        if self.warm:
            self.proc = _Forked(job, env, self.run_dir.stdout_path, self.run_dir.stderr_path)
            return
        with (
            open(self.run_dir.stdout_path, "ab") as stdout,
            open(self.run_dir.stderr_path, "ab") as stderr,
        ):
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "debias_bench.launchers.worker"],
                stdin=subprocess.PIPE,
                stdout=stdout,
                stderr=stderr,
                env=env,
                preexec_fn=_die_with_parent,  # a run dies with its launcher
            )
        assert self.proc.stdin is not None
        self.proc.stdin.write(job.to_json().encode())
        self.proc.stdin.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

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

    def finish(self) -> RunState:
        """Record the exit (after it has exited); returns the run's state."""
        code = self.proc.wait()
        return record_exit(
            self.run_dir,
            self.job.config,
            code,
            self.run_dir.log_tail(self.offset),
            pid=self.proc.pid,
            timeout_s=self.timeout_s if self.timed_out else None,
        )


def record_exit(
    run_dir: RunDir,
    config: dict[str, Any],
    returncode: int,
    stderr_tail: str,
    pid: int | None = None,
    timeout_s: float | None = None,
) -> RunState:
    """Record a finished worker's exit code and stderr tail in ``status.json``, and the outcome
    of a worker that could not record it: timed out, or failed when it never started the run,
    dead when it died during the run (killed, crashed). Returns the run's state.

    Called by the process that started the worker (whose pid is ``pid``), after it exited; it
    takes the run's lock, so it never writes over a run that another live process owns.
    ``config``: the run's ``RunConfig.to_json()``."""
    from debias_bench.config import RunConfig
    from debias_bench.provenance import config_json

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


if __name__ == "__main__":
    sys.exit(main())
