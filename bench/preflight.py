"""Checks `bench run` makes before a single run directory exists.

A sweep that cannot work should fail in one line before it records anything: a run store that
is a file or read-only, a device that does not exist, a dataset with no data and no way to get
it. (Hyperparameters and data options are checked when the grid is expanded, in
``debias_bench.config`` and ``debias_bench.grid``.)
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from debias_bench.config import RunConfig
from debias_bench.engine import DataPlace, resolve_device
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS

_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


def check_out(out: Path) -> Path:
    """The run store directory, created if needed; an error when it cannot be written."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory", hint="pick a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"--out {out} is not writable ({exc.strerror or exc})",
            hint="pick a directory you can write to",
        ) from None
    return out


def check_device(name: str) -> None:
    if not _DEVICE.fullmatch(name):
        raise ConfigError(f"unknown --device {name!r}", hint="auto, cpu, cuda, cuda:N or mps")
    resolve_device(name)  # a clear error when CUDA is asked for and not there


def check_data(configs: Iterable[RunConfig], place: DataPlace) -> None:
    """Every dataset (with its build options) of the grid is prepared, buildable from raw
    sources on disk, or downloadable; otherwise one error naming each missing one."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for config in configs:
        key = (config.dataset, repr(sorted(config.data_options.items())))
        if key in seen:
            continue
        seen.add(key)
        family = DATASETS.get(config.dataset)(
            place.raw_root, place.data_root, **config.data_options
        )
        problem = family.availability()
        if problem:
            named = problem.startswith(config.dataset)
            problems.append(problem if named else f"{config.dataset}: {problem}")
    if problems:
        raise ConfigError("data missing; nothing was started:\n  " + "\n  ".join(problems))


def check_seeds(seeds: list[int]) -> list[int]:
    bad = [s for s in seeds if s < 0]
    if bad:
        raise ConfigError(f"--seeds must be integers >= 0, not {bad}")
    return list(dict.fromkeys(seeds))


def unique(values: list[float]) -> list[float]:
    """``[5, 5.0, 1]`` -> ``[5.0, 1.0]``: duplicate grid entries collapse before launch."""
    return list(dict.fromkeys(float(v) for v in values))
