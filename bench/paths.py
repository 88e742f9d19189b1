"""Where raw data, prepared data and runs live.

* raw root (``--raw-root`` / ``BENCH_RAW_ROOT``): downloads and releases as published; read only.
* data root (``--data-root`` / ``BENCH_DATA_ROOT``): what ``bench data prepare`` builds.
* out (``--out``): the run store of a sweep.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from debias_bench.errors import ConfigError

DEFAULT_OUT = Path("results") / "runs"


@dataclass(frozen=True)
class DataPlace:
    """Where a run reads its data: the raw root and the data root (the module docstring)."""

    raw_root: Path
    data_root: Path


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "debias-bench"


def raw_root(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("BENCH_RAW_ROOT")
    return Path(env).expanduser() if env else _cache_home() / "raw"


def data_root(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("BENCH_DATA_ROOT")
    return Path(env).expanduser() if env else _cache_home() / "data"


#: the longest name of one path component (NAME_MAX) and of a whole path (PATH_MAX) where the
#: file system does not say (``os.pathconf``)
NAME_MAX, PATH_MAX = 255, 4096


def existing_ancestor(path: Path) -> Path:
    """``path`` itself or its nearest ancestor that exists."""
    path = Path(os.path.abspath(path))
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _limit(path: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(path, name))
    except (OSError, ValueError):
        return default


def check_path(path: Path, flag: str) -> None:
    """A path no file system takes (a component longer than NAME_MAX, usually 255 bytes; the
    whole longer than PATH_MAX): one error naming the component and the limit, before
    anything is created or read (``flag``: how the error names the path, ``--out``)."""
    path = Path(os.path.abspath(Path(path).expanduser()))
    where = existing_ancestor(path)
    name_max = _limit(where, "PC_NAME_MAX", NAME_MAX)
    path_max = _limit(where, "PC_PATH_MAX", PATH_MAX)
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > name_max:
            raise ConfigError(
                f"{flag} {str(path)[:80]}...: the name {part[:24]}... is {size} bytes long, "
                f"more than the {name_max} this file system takes in one path component",
                hint=f"give {flag} a path whose every folder name is at most {name_max} bytes",
            )
    size = len(os.fsencode(str(path)))
    if size >= path_max:
        raise ConfigError(
            f"{flag} {str(path)[:80]}... is {size} bytes long, more than the {path_max} "
            "this system takes in a path",
            hint=f"give {flag} a shorter path",
        )
