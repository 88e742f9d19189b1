"""Who owns a run: the ``flock`` on its ``.lock`` file, held by the process that writes the
run's files while it lives (:meth:`~debias_bench.runs.run_dir.RunDir.claim`).

The lock tells a live run from a dead one on the same host; where it cannot be told (no lock
file, a file system without locks) the recorded pid does, and across hosts (a shared file
system whose locks are host-local) the heartbeat (:mod:`debias_bench.runs.states`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from debias_bench.runs.jsonio import writing
from debias_bench.runs.nofollow import open_own

__all__ = ["hold_lock", "lock_held", "pid_alive"]


@contextlib.contextmanager
def hold_lock(lock_path: Path, wait_s: float = 3.0) -> Iterator[bool]:
    """Hold the lock for the duration of the block; yields False if another process holds
    it. Waits up to ``wait_s`` (a reader's momentary shared lock is not an owner). Where the
    file system has no locks, yields True (the heartbeat then decides)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with writing(lock_path):  # never through a link: a dangling one would create its target
        fd = open_own(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
            except OSError:  # no lock support (some network file systems)
                break
        yield True
    finally:
        os.close(fd)  # releases the lock


def lock_held(lock_path: Path) -> bool | None:
    """Whether some process holds the lock; None when it cannot be told."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # none yet, or a link (a link is not the run's lock)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    """Whether a process of that id exists on this host (one of another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
