"""Atomic files: written to a temporary file in the same folder and renamed into place, so a
reader never sees a half-written file and a killed writer leaves the old file (or none), never
an empty or torn one; a failed write removes its temporary file and raises an ``OSError``
naming the file it was writing (``store_write`` set on it), so a full disk fails a run with the
path and the errno. :func:`write_output` is the same write for a file the user named (``-o``):
any failure is one :class:`~debias_bench.errors.BenchError` naming the path."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from debias_bench.errors import BenchError, CorruptDataError
from debias_bench.runs.nofollow import open_own

#: a full disk or quota
_FULL = (errno.ENOSPC, errno.EDQUOT)

__all__ = [
    "check_output",
    "json_text",
    "os_error",
    "read_json",
    "write_atomic",
    "write_json",
    "write_output",
    "writing",
]


@contextlib.contextmanager
def writing(path: Path, tmp: Path | None = None) -> Iterator[None]:
    """Name ``path`` in an OSError raised while writing it (a bare ENOSPC from ``write()``
    names no file), mark it as a store write, and remove the temporary file ``tmp``."""
    try:
        yield
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
        cause = os_error(exc) if isinstance(exc, Exception) else None  # not Ctrl-C
        if cause is None:
            raise
        named = OSError(cause.errno, cause.strerror or str(cause), str(path))
        named.store_write = True  # type: ignore[attr-defined]
        raise named from exc


def os_error(exc: BaseException | None) -> OSError | None:
    """The OSError behind ``exc``: itself, or one it was raised from or during (torch.save
    turns a full disk into ``RuntimeError: unexpected pos`` raised while handling it)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with writing(path, tmp):
        # exclusive and never through a link: a link planted under the temporary name is not
        # written through (the rename below replaces one planted under ``path``)
        with open(
            open_own(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w", encoding="utf-8"
        ) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)


def check_output(path: Path, flag: str = "-o") -> Path:
    """``path`` as a file to write, its folder created: a folder, or a folder that cannot be
    created, is a BenchError naming it (checked before the work whose output it is)."""
    path = Path(path)
    if path.is_dir():
        raise BenchError(
            f"{flag} {path} is a folder, not a file",
            hint=f"name a file, e.g. {flag} {path / 'report.md'}",
        )
    above = next((p for p in path.parents if p.exists()), None)  # what the folders go under
    if above is not None and not above.is_dir():
        raise BenchError(
            f"{flag} {path}: {above} is a file, not a folder",
            hint="name a file in a folder you can write",
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(
            f"{flag} {path}: cannot create its folder {path.parent} ({exc.strerror or exc})",
            hint="name a file in a folder you can write",
        ) from None
    return path


def write_output(path: Path, text: str, flag: str = "-o") -> None:
    """Write ``text`` to the file the user named with ``flag``, atomically (:func:`write_atomic`):
    an interrupted or failed write leaves the file as it was; a folder, a folder that cannot be
    created, or a full disk is one BenchError naming the path."""
    path = check_output(path, flag)
    try:
        write_atomic(path, text)
    except OSError as exc:
        cause = "no space left on the device" if exc.errno in _FULL else exc.strerror or str(exc)
        raise BenchError(
            f"{flag} {path}: cannot write it ({cause}); the file is as it was before",
            hint="free space there, or name another file" if exc.errno in _FULL else None,
        ) from None


def json_text(data: Any) -> str:
    """``data`` as the JSON files here hold it: indented, keys sorted, a final newline."""
    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json_text(data))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"holds {name}")


def read_json(path: Path, strict: bool = False) -> Any:
    """The JSON in ``path``; CorruptDataError when it is torn, not UTF-8 or unreadable.
    ``strict``: NaN and Infinity are errors too (a result must be finite)."""
    try:
        text = path.read_text()
        if strict:
            return json.loads(text, parse_constant=_reject_constant)
        return json.loads(text)
    except FileNotFoundError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise CorruptDataError(f"{path} is not valid JSON ({exc})") from exc
    except OSError as exc:
        raise CorruptDataError(f"cannot read {path} ({exc})") from exc


def remove_temp_files(folder: Path) -> list[Path]:
    """Delete the temporary files (``.<name>.tmp``) that writes of a dead or failed process
    left in ``folder``; returns them."""
    removed = []
    for tmp in folder.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed
