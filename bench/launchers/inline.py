"""``--launcher inline`` (the default): runs one after another in the ``bench`` process itself.

The simplest and cheapest launcher (the dataset is loaded once for consecutive runs); a
Python error in a run is recorded and the sweep goes on, and so is an ``os._exit()`` in a
run's code (``failed (crashed)``, :func:`~debias_bench.launchers.run_one.exits_raise`), but a crash
of
the interpreter takes the sweep with it: use ``--launcher local`` for isolation.

Ctrl-C, SIGTERM and SIGHUP behave as under the other launchers: the running run checkpoints
at its next step and ends ``interrupted`` (a rerun resumes it, as the same attempt), no
traceback, and the sweep stops with its summary and exit code ``128 + signal``
(:attr:`InlineLauncher.stop_signal`). A second signal, or ``--grace`` seconds without the run
reaching its next step (a method stuck in ``update``), stops the run's code at once
(:class:`StopNow`): the run is ``interrupted`` from its last checkpoint. If the grace ran out
and its code does not even return to Python to be stopped (stuck in C), the process exits
``max(--grace, 10 s)`` later with ``128 + signal`` and no summary, the run ``dead`` (a rerun
resumes it).
A ``kill -9`` of the process leaves the run ``dead``; a plain rerun resumes it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from debias_bench.errors import ConfigError, Interrupted
from debias_bench.launchers.run_one import KEYBOARD_NOTE, run_one, worker_identity
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.training.devices import resolve_device

from .factories import Launchable, LaunchContext, register_launcher
from .options import LauncherOptions
from .scheduler import Ended, Launcher, Task, signal_label
from .slots import Slot, crowding_now

if TYPE_CHECKING:
    import torch

#: the signals that stop an inline sweep (SIGUSR1, a preemption notice, only asks, as before)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: ``os._exit`` itself, whatever a run's code does to ``os`` (the last-resort exit)
_EXIT = os._exit
#: the least time a run's code stuck outside Python gets after it was told to stop at once
MIN_HARD_EXIT_S = 10.0


class StopNow(KeyboardInterrupt):
    """Raised in the running run's code (from the signal handler) to stop it at once; the run
    records itself ``interrupted`` with this message as its note."""


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # a hung-up terminal (SIGHUP) must not end the stop
        print(text, file=sys.stderr, flush=True)


@register_launcher(
    "inline",
    display_name="in this process, one run after another",
    where="in this process on {device}",
    catches_sigint=True,
    kill_on_second_signal=False,
)
class InlineLauncher(Launchable):
    poll_interval_s = 0.0

    def __init__(self, ctx: LaunchContext, device: torch.device) -> None:
        self.ctx, self.device = ctx, device
        self.ended: list[Ended] = []
        #: the first stop signal (SIGINT, SIGTERM, SIGHUP) the sweep got (the scheduler reads it)
        self.stop_signal: int | None = None
        self._catching = False
        self._previous_handlers: dict[int, Any] = {}
        self._running: Task | None = None  # the task whose code runs now
        self._stopping_now = False  # StopNow was raised in the running run
        self._grace_over: str | None = None  # why the grace timer stops the run at once
        self._stopped = threading.Event()  # set when the sweep no longer runs a run's code

    @classmethod
    def from_options(cls, options: LauncherOptions, ctx: LaunchContext) -> Launcher:
        if ctx.timeout_s:
            raise ConfigError("--timeout needs --launcher local or slurm (a run in a process)")
        return cls(ctx, resolve_device(ctx.device))

    def free(self) -> int:
        return 1

    def crowding(self) -> str | None:
        if self.device.type != "cpu":
            return None
        import torch  # loaded by now (the device was resolved); the module imports none

        return crowding_now([Slot(0, None, torch.get_num_threads())])

    # ---------------------------------------------------------------- signals
    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum
            label = signal_label(signum)
            if self._running is None:
                _say(f"\n{label}: stopping the sweep")
                return
            grace = self.ctx.grace_s
            _say(
                f"\n{label}: checkpointing at the next step (again, or after --grace {grace:g} "
                "s: stop now, from the last checkpoint)"
            )
            threading.Thread(
                target=self._after_grace, args=(signum, self._running), daemon=True
            ).start()
            return
        self._stop_now(self._grace_over or f"stopped by a second {signal_label(signum)}")

    def _stop_now(self, why: str) -> None:
        """Stop the running run's code at once (in the main thread, from a signal handler)."""
        if self._running is None or self._stopping_now:
            return  # between runs the sweep is stopping anyway; a third signal changes nothing
        self._stopping_now = True
        raise StopNow(f"{why}; a rerun resumes from its last checkpoint")

    def _after_grace(self, signum: int, task: Task) -> None:
        """The grace timer of a stop: the run that has not stopped after ``--grace`` s is
        stopped at once; code that cannot be (stuck outside Python) ends the process."""
        grace = self.ctx.grace_s
        if self._stopped.wait(grace) or self._running is not task:
            return
        self._grace_over = f"did not reach its next step within --grace {grace:g} s of the stop"
        _say(f"{task.label}: {self._grace_over}: stopping it now")
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_kill(threading.main_thread().ident or 0, signum)  # -> _stop_now
        if self._stopped.wait(max(grace, MIN_HARD_EXIT_S)) or self._running is not task:
            return
        _say(
            f"{task.label}: its code does not return to Python; exiting without a summary "
            f"(exit code {128 + signum}); the run shows as dead and a rerun resumes it"
        )
        _EXIT(128 + signum)

    def _catch_signals(self) -> None:
        """Handle the stop signals from the first run until :meth:`close` (main thread only)."""
        if not self._catching and threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous_handlers[sig] = signal.signal(sig, self._on_signal)
            self._catching = True

    # ---------------------------------------------------------------- runs
    def start(self, tasks: list[Task]) -> None:
        self._catch_signals()
        for task in tasks:
            if self.stop_signal is not None:
                why = f"not started ({signal_label(self.stop_signal)})"
                self.ended.append(Ended(task, RunState.PENDING, why, ran=False))
                continue
            print(task.label, file=sys.stderr, flush=True)
            self.ended.append(self._run(task))

    def _run(self, task: Task) -> Ended:
        self._running, self._stopping_now, self._grace_over = task, False, None
        self._stopped.clear()
        try:
            outcome = run_one(
                task.config,
                self.ctx.store,
                self.ctx.place,
                self.device,
                self.ctx.progress(task),
                retry_failed=True,  # the scheduler decided
                should_stop=lambda step: self.ctx.should_stop() or self.stop_signal is not None,
                max_attempts=self.ctx.max_attempts,
                status_fields={**worker_identity(), "launcher": self.name},
                track=self.ctx.track,
            )
        except Interrupted as exc:
            return Ended(task, RunState.INTERRUPTED, str(exc))
        except KeyboardInterrupt as exc:  # stopped at once: the run recorded its interruption
            note = str(exc) or KEYBOARD_NOTE  # a KeyboardInterrupt raised by the run's code
            return Ended(task, _settle_stopped(self.ctx.store.run(task.run_id), note), note)
        finally:
            self._running = None
            self._stopped.set()
        return Ended(task, outcome.state, outcome.note, outcome.ran, outcome.result)

    def poll(self) -> list[Ended]:
        ended, self.ended = self.ended, []
        return ended

    def active(self) -> dict[str, str]:
        """The runs that ran inside :meth:`start` and whose outcome :meth:`poll` has not
        handed over yet (the sweep is busy until it has)."""
        return {ended.task.run_id: RunState.RUNNING.value for ended in self.ended}

    def stop(self) -> None: ...

    def close(self) -> None:
        self._stopped.set()
        if self._catching:
            for sig, previous in self._previous_handlers.items():
                if previous is None:  # set outside Python: the default
                    previous = (
                        signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
                    )
                signal.signal(sig, previous)
            self._previous_handlers.clear()
            self._catching = False


def _settle_stopped(run_dir: RunDir, note: str) -> RunState:
    """The state of a run whose code was stopped at once: as it recorded it, or
    ``interrupted`` if the stop came before it could (it still says ``running``, by us)."""
    with run_dir.claim() as owned:
        if owned and not run_dir.is_done() and not run_dir.fault():
            status = run_dir.status()
            if status.get("state") == RunState.RUNNING and status.get("pid") == os.getpid():
                run_dir.transition(RunState.INTERRUPTED, note=note)
        return run_dir.effective_state(owned=bool(owned))
