"""Progress bars that behave in a terminal and in a log file (CI, SLURM)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm


def progress_bar(
    iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str, unit: str
) -> tqdm:
    """A tqdm bar on a terminal; in a log, one line saying what starts instead of a stream of
    carriage-return updates."""
    if sys.stderr.isatty():
        return tqdm(iterable, total=total, desc=desc, unit=unit, leave=False)
    size = f"{total} {unit}{'' if total == 1 else 's'}" if total is not None else unit + "s"
    print(f"{desc} ({size})...", file=sys.stderr, flush=True)
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=True)
