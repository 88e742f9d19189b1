"""Where raw data, prepared data and runs live.

* raw root (``--raw-root`` / ``BENCH_RAW_ROOT``): downloads and releases as published; read only.
* data root (``--data-root`` / ``BENCH_DATA_ROOT``): what ``bench data prepare`` builds.
* out (``--out``): the run store of a sweep.
"""

from __future__ import annotations

import argparse
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


#: the flags that name a folder, by their argparse ``dest``: an empty value is the working
#: directory to ``Path`` (``Path("") == Path(".")``), never what anyone meant
FOLDER_FLAGS = {"out": "--out"}


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


def check_folder_flags(args: argparse.Namespace) -> None:
    """Refuse a folder flag of :data:`FOLDER_FLAGS` given as an empty (or blank) string, which
    would make the working directory the run store: a ConfigError, before any command runs."""
    for dest, flag in FOLDER_FLAGS.items():
        value = getattr(args, dest, None)
        if isinstance(value, str) and not value.strip():
            raise ConfigError(
                f"{flag} must name a folder, not {value!r} (e.g. {flag} {DEFAULT_OUT})"
            )
