"""Errors that reach the user: each names the problem and, where there is one, the fix; and
why a run fails (:class:`FailReason`, raised inside a run as :class:`RunFailure`). The run
states themselves live in :mod:`debias_bench.runs.states`."""

from __future__ import annotations

import errno
from enum import Enum
from typing import Any

#: the errnos of a full disk or an exhausted quota
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class BenchError(Exception):
    """An error caused by input or environment, reported to the user without a traceback."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UnknownNameError(BenchError, KeyError):
    """A method, dataset, preset or protocol name that is not registered."""


class DataNotFoundError(BenchError, FileNotFoundError):
    """Raw or prepared data that is not where we looked."""


class CorruptDataError(BenchError, ValueError):
    """A data file that exists but cannot be read or fails its checks."""


class ConfigError(BenchError, ValueError):
    """An invalid hyperparameter, override or combination."""


class FailReason(str, Enum):
    """Why a run failed: a small declared set, recorded as ``reason`` in ``status.json``
    (with the details in ``error``)."""

    CRASHED = "crashed"  # an exception in the run (a bug, a bad config, a corrupt checkpoint)
    DIVERGED = "diverged"  # a logged scalar became NaN or infinite
    TIMED_OUT = "timed out"  # the launcher's --timeout
    DISK_FULL = "disk full"  # ENOSPC / EDQUOT while writing the run store
    WRITE_ERROR = "write error"  # another OSError while writing the run store
    KILLED = "killed by signal"  # the worker was killed (SIGKILL, OOM killer) mid-run
    OUT_OF_MEMORY = "out of memory"  # MemoryError, torch's OOM, or the OOM killer's SIGKILL
    DIED = "process died"  # it vanished without recording an outcome, too often
    NOT_STARTED = "did not start"  # the worker or job ended before the run started
    BAD_PREDICTIONS = "bad predictions"  # predict() gave non-finite logits or a wrong shape
    BAD_DATA = "bad data"  # the data it read failed a check (labels out of range, checksum)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class RunFailure(BenchError):
    """Raised inside a run to end it as ``failed`` with a declared reason (the engine raises
    ``RunFailure(FailReason.DIVERGED, "train loss is nan at step 120", step=120)``).

    ``fields`` are recorded in ``status.json`` next to ``reason`` and ``error``."""

    def __init__(
        self, reason: FailReason, message: str, hint: str | None = None, **fields: Any
    ) -> None:
        super().__init__(message, hint)
        self.reason = FailReason(reason)
        self.fields = fields


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or during, says the disk is full:
    ENOSPC / EDQUOT, or NumPy's errno-less ``OSError: Not enough free space to write N bytes``
    (``ndarray.tofile``, what ``np.save`` calls)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and (
            exc.errno in DISK_FULL_ERRNOS or str(exc).startswith("Not enough free space")
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class Interrupted(Exception):
    """Raised after a checkpoint when the run was asked to stop (signal, preemption, test)."""
