"""Opening a file of a run folder for writing without ever writing through a symbolic link.

A run store is often shared (a cluster's file system, a group folder): whoever can write into
it can put a link where a run's file goes (``stderr.log`` -> a file of the sweep owner's,
``.lock`` -> a file that does not exist yet). Every file the harness opens for writing or
appending inside a run folder is opened here, with ``O_NOFOLLOW``: a link in its place is
removed (the link, never its target) and the file is made afresh, as the atomic rename of
``status.json`` or ``result.json`` replaces a link with the file written."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

__all__ = ["open_own"]


def open_own(path: Path | str, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags, mode)`` that never follows a symbolic link at ``path``; returns
    the file descriptor (close-on-exec). A link there is removed and the file created in its
    place (``flags`` should hold ``O_CREAT``); with ``O_EXCL`` (a temporary file) whatever is
    already at ``path`` is removed first: a leftover of a dead process of the same pid, or a
    link planted under the name."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    for attempt in range(3):
        try:
            return os.open(path, flags, mode)
        except OSError as exc:
            planted = exc.errno == errno.ELOOP and os.path.islink(path)
            taken = exc.errno == errno.EEXIST and bool(flags & os.O_EXCL)
            if attempt == 2 or not (planted or taken):
                raise
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a link: the link itself is removed, never its target
    raise AssertionError("unreachable")


def read_tail(path: Path, offset: int = 0, max_chars: int = 2000) -> str:
    """The end of the text file ``path`` from byte ``offset`` on, at most ``max_chars``
    characters; "" when it cannot be read, and nothing from a link put in its place (a log's
    tail is recorded in ``status.json``, which others may read)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(offset, size - max_chars * 4))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text[-max_chars:]
