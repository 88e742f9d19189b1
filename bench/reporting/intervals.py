"""Intervals of a cell's mean over seeds: the t-interval or the percentile bootstrap interval
(:class:`IntervalSpec`, ``bench report --interval``, ``bench compare --interval``), and the test
for values without spread that every statistic here needs. What each interval assumes:
:mod:`debias_bench.reporting.significance`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: the default level of the tests, and 1 - the intervals' coverage
ALPHA = 0.05
#: interval kinds of ``bench report --interval`` and ``bench compare --interval``
INTERVALS = ("t", "bootstrap")
#: the default bootstrap resample count and seed
RESAMPLES = 9999
BOOTSTRAP_SEED = 0
#: equal "up to float rounding": scipy's own test for catastrophic cancellation (its moments
#: warn when every value is within 10 eps of their mean, relative to the mean)
_FLAT = 10 * float(np.finfo(float).eps)


@dataclass(frozen=True)
class IntervalSpec:
    """How an interval is computed: ``t`` or ``bootstrap`` (with its resamples and seed)."""

    kind: str = "t"
    alpha: float = ALPHA
    resamples: int = RESAMPLES
    seed: int = BOOTSTRAP_SEED

    def __post_init__(self) -> None:
        if self.kind not in INTERVALS:
            raise ValueError(f"interval must be one of {INTERVALS}, not {self.kind!r}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), not {self.alpha}")
        if self.resamples < 1:
            raise ValueError(f"bootstrap resamples must be >= 1, not {self.resamples}")

    @property
    def level(self) -> str:
        """The coverage as printed: ``95 %``."""
        return f"{100 * (1 - self.alpha):g} %"

    def describe(self) -> str:
        """What the interval is, for a caption."""
        if self.kind == "t":
            return (
                f"the {self.level} t-interval of the mean over seeds "
                "(mean ± t(1 − α/2, n − 1)·s/√n; assumes normal seed results; none for n = 1)"
            )
        return (
            f"the {self.level} percentile bootstrap interval of the mean over seeds "
            f"({self.resamples} resamples, seed {self.seed}; with 3 seeds narrower than the "
            "t-interval; none for n = 1)"
        )

    def describe_difference(self) -> str:
        """What the interval of a difference of two cells' means is, for a caption."""
        if self.kind == "t":
            return (
                f"its {self.level} t-interval (of the paired differences, or Welch's where the "
                "runs do not pair)"
            )
        return (
            f"its {self.level} percentile bootstrap interval ({self.resamples} resamples, seed "
            f"{self.seed}; of the paired differences, or the two cells resampled apart)"
        )

    def of(self, values: Sequence[float]) -> tuple[float, float] | None:
        """The interval of the mean of ``values``; None for fewer than 2."""
        if self.kind == "t":
            return t_interval(values, self.alpha)
        return bootstrap_interval(values, self.alpha, self.resamples, self.seed)


def t_interval(values: Sequence[float], alpha: float = ALPHA) -> tuple[float, float] | None:
    """mean +- t(1 - alpha/2, n - 1) * s / sqrt(n); None for n < 2."""
    from scipy import stats  # ~1 s to import: only when statistics are asked for

    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return None
    if flat(x):  # no spread (scipy would warn of precision loss, or divide by 0)
        return float(x.mean()), float(x.mean())
    sem = float(stats.sem(x))
    low, high = stats.t.interval(1 - alpha, len(x) - 1, loc=float(x.mean()), scale=sem)
    return float(low), float(high)


def bootstrap_interval(
    values: Sequence[float], alpha: float = ALPHA, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the mean; None for n < 2."""
    from scipy import stats  # ~1 s to import: only when statistics are asked for

    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return None
    if flat(x):  # every resample has the same mean
        return float(x[0]), float(x[0])
    result = stats.bootstrap(
        (x,),
        np.mean,
        confidence_level=1 - alpha,
        n_resamples=resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return float(ci.low), float(ci.high)


def flat(values: np.ndarray) -> bool:
    """Whether ``values`` are all equal up to float rounding (relative to their mean): they
    have no spread a test could use (scipy's moments lose all precision on them)."""
    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    deviation = float(np.max(np.abs(x - mean)))
    return deviation == 0.0 or deviation < _FLAT * abs(mean)
