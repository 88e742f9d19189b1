"""What a launcher is to the sweep loop (:mod:`debias_bench.launchers.scheduler`): the
:class:`Launcher` interface (start runs, tell when they ended, stop them), the :class:`Task` it is
handed for each run, the :class:`Ended` it reports back, and how the sweep and the launchers name
a signal that stops them (:func:`signal_label`)."""

from __future__ import annotations

import signal
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from debias_bench.config.run_config import RunConfig
from debias_bench.runs.states import RunState


def signal_label(signum: int) -> str:
    """``Ctrl-C`` for SIGINT, else the signal's name (``SIGTERM``), for what the sweep says."""
    if signum == signal.SIGINT:
        return "Ctrl-C"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass
class Task:
    config: RunConfig
    label: str

    @property
    def run_id(self) -> str:
        return self.config.run_id


@dataclass
class Ended:
    """A run whose worker (or job) ended, with the state it recorded."""

    task: Task
    state: RunState  # done | failed | interrupted | skipped | corrupt | running (elsewhere)
    note: str = ""
    ran: bool = True
    result: dict[str, Any] | None = None


class Launcher(ABC):
    """Where runs execute. ``start`` must not block for long (except the inline launcher,
    which runs in the caller's process)."""

    name = "launcher"
    poll_interval_s = 0.2

    @abstractmethod
    def free(self) -> int:
        """How many more runs can start now."""

    @abstractmethod
    def start(self, tasks: list[Task]) -> None: ...

    @abstractmethod
    def poll(self) -> list[Ended]:
        """The runs that ended since the last call."""

    @abstractmethod
    def active(self) -> dict[str, str]:
        """run id -> 'running' or 'queued', for the runs started and not yet ended."""

    @abstractmethod
    def stop(self) -> None:
        """Ask the active runs to checkpoint and stop (fail-fast, or a signal to the sweep)."""

    def wait(self, timeout_s: float) -> None:
        """Block until a run may have ended, at most ``timeout_s`` (this default: sleep)."""
        time.sleep(timeout_s)

    def parallelism(self) -> int:
        """How many runs execute at once (the sweep's start line says so)."""
        return 1

    def crowding(self) -> str | None:
        """Why this launcher's CPU workers would oversubscribe this machine's busy cores now,
        with the fixes (printed as a warning when a sweep has runs to do); None when they fit
        or it cannot tell."""
        return None

    def detach(self) -> str | None:
        """When the sweep process stops while runs are active: a message if they keep going
        without it (SLURM), or None if the sweep must wait for them to stop (local)."""
        return None

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release what the launcher holds when the sweep ends."""
