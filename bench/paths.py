"""Where raw data, prepared data and runs live.

* raw root (``--raw-root`` / ``BENCH_RAW_ROOT``): downloads and releases as published; read only.
* data root (``--data-root`` / ``BENCH_DATA_ROOT``): what ``bench data prepare`` builds.
* out (``--out``): the run store of a sweep.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_OUT = Path("results") / "runs"


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
