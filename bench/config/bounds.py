"""The bounds of the values that say how a sweep executes (seeds, timeouts, grace periods,
attempts, threads from the environment), one home for the command line's flags
(``debias_bench.commands.flags``) and the keywords of ``debias_bench.run``. The range rule is
the hyperparameters' own (:func:`debias_bench.config.hparams.in_range`)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from debias_bench.config.hparams import MAX_THREADS, describe_range, in_range
from debias_bench.errors import ConfigError

#: a seed of torch, NumPy and Python's ``random`` alike
#: (``debias_bench.config.run_config.SEED_RANGE``)
MAX_SEED = 2**32 - 1
#: the longest --timeout anyone means: 30 days
MAX_SECONDS = 30 * 24 * 3600
#: the longest --grace (a stopped run's time to checkpoint): an hour
MAX_GRACE_S = 3600
#: the most attempts a run may be given: far beyond any need, short of a typo
MAX_ATTEMPTS_LIMIT = 100


def seconds(text: str | float) -> float:
    """A timeout: ``90`` (seconds), ``"30m"``, ``"2h"``; more than 0, at most 30 days;
    ConfigError otherwise."""
    raw = str(text).strip()
    scale = {"s": 1, "m": 60, "h": 3600}.get(raw[-1:].lower())
    try:
        value = float(raw[:-1]) * scale if scale else float(raw)
    except ValueError:
        value = math.nan
    if not in_range(value, 0, MAX_SECONDS, low_open=True):
        raise ConfigError(
            f"bad timeout {text!r}: give seconds, or 30m, 2h "
            f"({describe_range('seconds', 0, MAX_SECONDS, True)})"
        )
    return value


def check_bound(name: str, value: float, low: float, high: float) -> float:
    """``value`` when it lies in ``[low, high]``; a ConfigError naming ``name`` otherwise."""
    if not in_range(value, low, high):
        raise ConfigError(f"{name}={value!r} is not {describe_range('a number', low, high)}")
    return value


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
