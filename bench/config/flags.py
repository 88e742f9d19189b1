"""Numeric command-line flags, checked against a declared range.

Every numeric flag of the CLI and of the launchers takes its type from here, so a value out of
range is one argparse error naming the flag and its range (exit 2, no traceback:
``debias_bench.cli``), before anything is created, also with --dry-run. The range rule is the
hyperparameters' own (:func:`debias_bench.config.hparams.in_range`)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from debias_bench.config.hparams import (
    ENGINE_HPARAMS,
    MAX_THREADS,
    HParam,
    describe_range,
    in_range,
)
from debias_bench.errors import ConfigError

#: a seed of torch, NumPy and Python's ``random`` alike
#: (``debias_bench.config.run_config.SEED_RANGE``)
MAX_SEED = 2**32 - 1
#: the longest --timeout anyone means: 30 days
MAX_SECONDS = 30 * 24 * 3600
#: the longest --grace (a stopped run's time to checkpoint): an hour
MAX_GRACE_S = 3600


def number(
    kind: Literal["int", "float"],
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> Callable[[str], Any]:
    """An argparse ``type``: a finite ``kind`` within ``[low, high]`` (``low_open``: above
    ``low``); otherwise an error that states the range (argparse names the flag)."""
    param = HParam("value", kind, None, "", low=low, high=high, low_open=low_open)

    def parse(text: str) -> Any:
        try:
            value = param.parse(text.strip(), "")
        except ConfigError:
            raise argparse.ArgumentTypeError(f"must be {param.describe()}, not {text!r}") from None
        return float(value) if kind == "float" else value

    parse.__name__ = kind  # argparse's fallback message: "invalid int value"
    return parse


def hparam_flag(name: str, flag: str) -> Callable[[str], Any]:
    """The argparse ``type`` of ``flag``, which sets the engine hyperparameter ``name``
    (``--epochs``): checked against that key's declaration, as ``--set name=value`` is."""
    param = next(p for p in ENGINE_HPARAMS if p.name == name)

    def parse(text: str) -> Any:
        try:
            return param.parse(text.strip(), flag)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(
                exc.message.replace(f"={text!r}", f"={text}")
            ) from None

    parse.__name__ = param.kind
    return parse


def duration(text: str) -> float:
    """``--timeout``: ``90`` (seconds), ``30m``, ``2h``; more than 0, at most 30 days."""
    scale = {"s": 1, "m": 60, "h": 3600}.get(text.strip()[-1:].lower())
    try:
        seconds = float(text.strip()[:-1]) * scale if scale else float(text)
    except ValueError:
        seconds = math.nan
    if not in_range(seconds, 0, MAX_SECONDS, low_open=True):
        raise argparse.ArgumentTypeError(
            f"bad --timeout {text!r}: give seconds, or 30m, 2h "
            f"({describe_range('seconds', 0, MAX_SECONDS, True)})"
        )
    return seconds


def check_thread_env(env: Mapping[str, str]) -> None:
    """``OMP_NUM_THREADS`` above :data:`~debias_bench.config.hparams.MAX_THREADS` (the bound of
    ``--threads`` and ``--set num_threads``): one error before torch reads it. A value that is
    no positive whole number is left alone: OpenMP ignores it, and so does the local launcher
    (``debias_bench.launchers.slots.user_threads``)."""
    value = env.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > MAX_THREADS:
        raise ConfigError(
            f"OMP_NUM_THREADS={value} is more threads than bench gives a run "
            f"(at most {MAX_THREADS}, as --threads and --set num_threads)",
            hint="set OMP_NUM_THREADS to the cores a run should use, or unset it",
        )
