"""Replacing a prepared dataset's folder atomically, recovering from a kill, and the build lock.

A build happens in ``<name>.building`` beside the live folder (``<name>.importing`` for
``bench data import``); ``replace_dir`` then renames the live folder aside to
``<name>.old-<pid>``, renames the new one into place and deletes the old one. A kill at any
point leaves either a complete folder under the live name or the live name missing beside a
complete sibling; ``settle`` (run under the build lock) puts that sibling back and removes
leftovers. "Complete" is ``integrity.completeness_problems`` finding nothing: the manifest,
written last, and every file it lists with its recorded size.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from debias_bench.data.integrity import completeness_problems
from debias_bench.data.spec import DatasetSpec


class Lockable(Protocol):
    """What the build lock needs of a dataset family (a structural type: this module sits
    below :mod:`debias_bench.data.family`, which uses it)."""

    @property
    def data_root(self) -> Path: ...

    @property
    def spec(self) -> DatasetSpec: ...


_HELD = threading.local()  # the build locks this thread holds (``build_lock`` nests)


@contextlib.contextmanager
def build_lock(family: Lockable) -> Iterator[None]:
    """One process at a time prepares (and first reads) a family in a data root: the workers
    of a sweep (or Slurm jobs sharing the data root) that start on an unbuilt dataset wait for
    the first one's build instead of writing the same staging folder at once. A thread that
    holds the lock may take it again (``prepare`` inside a caller's lock)."""
    folder = family.data_root / family.spec.name
    key = os.path.abspath(folder)
    held: set[str] = _HELD.__dict__.setdefault("paths", set())
    if key in held:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".build.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process preparing {family.spec.name}...", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # no lock support (some network file systems): go on unlocked
            pass
        held.add(key)
        yield
    finally:
        held.discard(key)
        os.close(fd)  # releases the lock


#: suffixes of a build's staging folder beside the live one (``<name>.building``, imports)
BUILDING, IMPORTING = ".building", ".importing"
#: a live folder renamed aside during a swap: ``<name>.old-<pid>``
OLD_MARK = ".old-"


def leftovers(folder: Path) -> list[Path]:
    """Folders beside ``folder`` left by a build or swap that did not finish: its staging
    (``<name>.building`` / ``<name>.importing``) and old copies set aside (``<name>.old-*``)."""
    try:
        siblings = list(folder.parent.iterdir())
    except OSError:
        return []
    staging = {folder.name + BUILDING, folder.name + IMPORTING}
    return sorted(
        p
        for p in siblings
        if (p.name in staging or p.name.startswith(folder.name + OLD_MARK)) and p.is_dir()
    )


def _set_aside(target: Path) -> Path:
    """Swap step 1: rename the live folder to ``<name>.old-<pid>``."""
    old = target.with_name(f"{target.name}{OLD_MARK}{os.getpid()}")
    if old.exists():  # left by an earlier process with this pid
        shutil.rmtree(old)
    os.rename(target, old)
    return old


def _put_in_place(new: Path, target: Path) -> None:
    """Swap step 2: rename the new folder to the live name (free after step 1)."""
    os.rename(new, target)
    _sync_dir(target.parent)


def _discard(old: Path) -> None:
    """Swap step 3: delete the old folder."""
    if old.exists():
        shutil.rmtree(old)


def _sync_dir(folder: Path) -> None:
    """Make the renames in ``folder`` durable (where the file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_dir(staging: Path, target: Path) -> None:
    """Put the finished folder ``staging`` (a sibling of ``target``) at ``target``: rename the
    live folder aside, rename the new one into place, delete the old one. Killed at any
    point, it leaves a complete folder under the live name, or the live name missing beside
    complete siblings (which ``settle`` puts back); never a live folder with files missing."""
    target.parent.mkdir(parents=True, exist_ok=True)
    old = _set_aside(target) if target.exists() else None
    _put_in_place(staging, target)
    if old is not None:
        _discard(old)


def settle(folder: Path) -> list[str]:
    """Finish or undo a build or swap at ``folder`` that a kill interrupted (call it under the
    build lock, so no live build's staging is touched); returns the one line saying what it
    did (empty: nothing was left).

    * live folder complete: the leftovers beside it are removed (an unfinished staging, a
      finished one whose swap never began, or the old copy whose deletion was cut short);
    * live folder missing or incomplete: the complete leftover is renamed into place (a
      finished staging first, else the old copy), the rest removed; with none complete, the
      leftovers are removed and the caller rebuilds."""
    stale = leftovers(folder)
    if not stale:
        return []
    recovered = None
    if completeness_problems(folder):
        ranked = sorted(stale, key=lambda p: (OLD_MARK in p.name, -p.stat().st_mtime))
        recovered = next((p for p in ranked if not completeness_problems(p)), None)
        if recovered is not None:
            if folder.exists():
                stale.append(_set_aside(folder))
            _put_in_place(recovered, folder)
            stale.remove(recovered)
    stale = [p for p in dict.fromkeys(stale) if p.exists()]
    for path in stale:
        _discard(path)
    removed = ", ".join(p.name for p in stale)
    if recovered is not None:
        tail = f" (removed {removed})" if removed else ""
        return [
            f"note: {folder} was left half-swapped by an interrupted build; "
            f"recovered the complete copy {recovered.name}{tail}"
        ]
    return [f"note: removed what an interrupted build left beside {folder}: {removed}"]
