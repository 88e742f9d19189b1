"""Atomic JSON files: written to a temporary file and renamed into place, so a reader never
sees a half-written file; a failed write removes its temporary file and raises an ``OSError``
naming the file it was writing (``store_write`` set on it), so a full disk fails a run with the
path and the errno."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from debias_bench.errors import CorruptDataError

__all__ = ["os_error", "read_json", "write_atomic", "write_json", "writing"]


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
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


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
