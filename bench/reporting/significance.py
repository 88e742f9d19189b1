"""Which differences hold: intervals over seeds, paired and Welch tests, Holm, power, ranks.

Pure functions on numbers (a cell's value per seed), so the table builders, ``bench compare``
and the docs page compute alike. Every test comes from a maintained library; what each assumes:

- **t-interval** of a mean over n seeds (``scipy.stats.t``): mean +- t(1 - alpha/2, n - 1) s/sqrt n.
  Assumes the seeds' results are independent draws from a normal distribution; none for n < 2.
- **bootstrap interval** (``scipy.stats.bootstrap``, percentile method, its resample count and
  seed stated): assumes only independent seeds, but with 3 seeds it has 10 distinct resample
  means and is narrower than the t-interval (it under-covers; measured in docs/statistics.md).
- **paired t-test** (``scipy.stats.ttest_rel``) where two cells' runs pair: the same seeds and the
  same data build. Runs of one seed share the build and the batch order (``TrainStream`` draws
  each epoch's order from ``(seed, epoch)``, the build depends on ``data_seed`` only) and the
  initial weights' RNG state, so the seed's luck is shared and the difference per seed removes it.
  Assumes the per-seed differences are independent and normal.
- **Welch's t-test** (``scipy.stats.ttest_ind(equal_var=False)``) where they do not pair (other
  seeds, another data build): assumes independent normal samples, variances may differ.
- **Holm** step-down (``statsmodels.stats.multitest.multipletests``) over a family of tests: keeps
  the family-wise error at alpha under any dependence between the tests.
- **seeds needed**: the smallest n whose power reaches ``POWER`` at level alpha for the observed
  effect taken as true (the noncentral t, ``scipy.stats.nct``: a one-sample test on d = mean/sd
  of the paired differences; where they do not pair, a pooled two-sample test on Cohen's d with
  the average variance, close to Welch's for equal n). The observed spread of 3 seeds is itself
  noisy: the number is an estimate, for one test at level alpha (``bench compare`` also gives
  it at alpha/m, enough for Holm over m tests).
- **Friedman test** (``scipy.stats.friedmanchisquare``) over the cells of a table (blocks) and
  the methods with a number in every cell: ranks within each cell (1 = best mean, ties averaged,
  ``scipy.stats.rankdata``); chi-square approximation, which assumes independent cells and is
  rough for few cells. **Nemenyi** post hoc (``scikit_posthocs.posthoc_nemenyi_friedman``) and its
  critical difference q(1 - alpha, k, inf)/sqrt 2 * sqrt(k(k+1)/(6N)) (``scipy.stats.
  studentized_range``; Demsar 2006): two methods whose average ranks differ by less are not told
  apart. Ranks use the means over seeds only, not their spread.

This module tests two cells (:func:`difference`, :func:`compare_methods`), corrects over a
family (Holm) and counts the seeds a test needs. The intervals of one cell are
:mod:`debias_bench.reporting.intervals`, the ranking over a table's cells
:mod:`debias_bench.reporting.ranks`; their names are importable from here too.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from debias_bench.reporting.intervals import (
    _FLAT,
    ALPHA,
    BOOTSTRAP_SEED,
    INTERVALS,
    RESAMPLES,
    IntervalSpec,
    bootstrap_interval,
    flat,
    t_interval,
)
from debias_bench.reporting.ranks import (
    MIN_RANKED_CELLS,
    MIN_RANKED_METHODS,
    RankTest,
    rank_shortfall,
    rank_test,
)

__all__ = [
    "ALPHA",
    "BOOTSTRAP_SEED",
    "INTERVALS",
    "MAX_SEEDS",
    "MIN_RANKED_CELLS",
    "MIN_RANKED_METHODS",
    "PAIRED",
    "POWER",
    "RESAMPLES",
    "WELCH",
    "Compared",
    "Difference",
    "IntervalSpec",
    "RankTest",
    "Sample",
    "bootstrap_interval",
    "compare_methods",
    "corrected",
    "difference",
    "flat",
    "holm",
    "holm_compared",
    "pair",
    "power",
    "rank_shortfall",
    "rank_test",
    "seeds_needed",
    "t_interval",
]

#: the power at which ``seeds_needed`` detects an observed difference
POWER = 0.8
#: ``seeds_needed`` looks no further (a larger need prints as ``> MAX_SEEDS``)
MAX_SEEDS = 10_000
PAIRED = "paired t"
WELCH = "Welch t"


@dataclass(frozen=True)
class Sample:
    """One cell's values by seed, and the data builds (fingerprints) its runs trained on; an
    empty ``data`` is a build the records do not name (the reproduction CSV: the recipe's)."""

    values: Mapping[int, float]
    data: frozenset[str] = frozenset()

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.values.values())))

    def array(self, seeds: Sequence[int] | None = None) -> np.ndarray:
        keys = sorted(self.values) if seeds is None else seeds
        return np.array([self.values[s] for s in keys], dtype=float)


def pair(a: Sample, b: Sample) -> bool:
    """Whether ``a`` and ``b`` pair by seed: the same seeds (2 or more) on the same data."""
    return a.n >= 2 and set(a.values) == set(b.values) and a.data == b.data


@dataclass(frozen=True)
class Difference:
    """``a - b`` over seeds: its interval, the test, its p-value (and after a correction)."""

    diff: float
    low: float
    high: float
    test: str  # PAIRED or WELCH
    p: float
    n_a: int
    n_b: int
    #: the standardised difference the power is computed for (|mean| / sd; inf: no spread)
    effect: float
    #: seeds per method for POWER at alpha, None when the difference is 0; > MAX_SEEDS: none found
    seeds_needed: int | None
    p_adjusted: float | None = None

    def holds(self, alpha: float = ALPHA) -> bool:
        """``a`` differs from ``b`` at level alpha (after the correction when there is one)."""
        p = self.p if self.p_adjusted is None else self.p_adjusted
        return p < alpha


def difference(
    a: Sample, b: Sample, interval: IntervalSpec | None = None, power: float = POWER
) -> Difference | None:
    """``a - b``: paired t-test where they :func:`pair`, else Welch's; None when either has
    fewer than 2 seeds. The interval of the difference is the test's t-interval, or a
    bootstrap one (of the paired differences, or of the two samples resampled apart)."""
    from scipy import stats  # ~1 s to import: only when statistics are asked for

    spec = interval or IntervalSpec()
    if a.n < 2 or b.n < 2:
        return None
    paired = pair(a, b)
    x, y = a.array(), b.array()  # by seed: the same order where they pair
    diff = float(x.mean() - y.mean())
    if flat(x - y) if paired else flat(x) and flat(y):
        return _without_spread(x, y, paired, power)
    with warnings.catch_warnings():
        # one of Welch's samples without spread: scipy warns of precision loss in its
        # variance, which is 0 either way; the test stays sound
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        if paired:
            result = stats.ttest_rel(x, y)
            d = x - y
            effect = _effect(float(d.mean()), float(d.std(ddof=1)))
        else:
            result = stats.ttest_ind(x, y, equal_var=False)
            sd = math.sqrt((float(x.var(ddof=1)) + float(y.var(ddof=1))) / 2)
            effect = _effect(diff, sd)
        low, high = _difference_interval(x, y, paired, result, spec)
    p = float(result.pvalue)
    return Difference(
        diff=diff,
        low=low,
        high=high,
        test=PAIRED if paired else WELCH,
        p=p,
        n_a=a.n,
        n_b=b.n,
        effect=effect,
        seeds_needed=seeds_needed(effect, paired, spec.alpha, power),
    )


def _without_spread(x: np.ndarray, y: np.ndarray, paired: bool, power: float) -> Difference:
    """``x - y`` where nothing varies (the same difference on every paired seed, or each cell
    the same on every seed), with no t-test (scipy's would divide by 0 or lose all precision):
    a difference within float rounding is none (p = 1), any other is certain (p = 0)."""
    diff = float(x.mean() - y.mean())
    scale = max(abs(float(x.mean())), abs(float(y.mean())))
    if abs(diff) <= _FLAT * scale:
        diff = 0.0
    return Difference(
        diff=diff,
        low=diff,
        high=diff,
        test=PAIRED if paired else WELCH,
        p=1.0 if diff == 0 else 0.0,
        n_a=len(x),
        n_b=len(y),
        effect=0.0 if diff == 0 else math.inf,
        seeds_needed=None if diff == 0 else 2,
    )


def _effect(mean: float, sd: float) -> float:
    """Standardised effect |mean| / sd; inf with no spread, 0 without a difference."""
    if mean == 0:
        return 0.0
    return math.inf if sd == 0 else abs(mean) / sd


def _difference_interval(
    x: np.ndarray, y: np.ndarray, paired: bool, result: Any, spec: IntervalSpec
) -> tuple[float, float]:
    """The interval of ``mean(x) - mean(y)``: the test's t-interval, or a bootstrap one."""
    from scipy import stats  # ~1 s to import: only when statistics are asked for

    if spec.kind == "t":
        ci = result.confidence_interval(1 - spec.alpha)
        return float(ci.low), float(ci.high)
    if paired:
        found = bootstrap_interval(x - y, spec.alpha, spec.resamples, spec.seed)
        assert found is not None  # n >= 2
        return found
    ci = stats.bootstrap(
        (x, y),
        lambda u, v, axis: np.mean(u, axis=axis) - np.mean(v, axis=axis),
        confidence_level=1 - spec.alpha,
        n_resamples=spec.resamples,
        method="percentile",
        rng=np.random.default_rng(spec.seed),
    ).confidence_interval
    return float(ci.low), float(ci.high)


def power(effect: float, n: int, paired: bool, alpha: float = ALPHA) -> float:
    """The power of a two-sided t-test at ``alpha`` with ``n`` seeds per method against a
    standardised ``effect``: one-sample on the paired differences (df n - 1, noncentrality
    effect sqrt n), or two-sample pooled (df 2n - 2, effect sqrt(n/2)); ``scipy.stats.nct``.

    statsmodels' ``TTestPower`` computes the same, but returns NaN where scipy's lower tail
    ``nct.cdf(-c)`` underflows (scipy 1.17: d = 5.7, n = 3, alpha = 0.05/24); that term is at
    most Phi(-noncentrality), so it counts as 0 there."""
    from scipy import stats  # ~1 s to import: only when statistics are asked for

    df = n - 1 if paired else 2 * n - 2
    ncp = effect * math.sqrt(n if paired else n / 2)
    c = stats.t.ppf(1 - alpha / 2, df)
    lower = float(stats.nct.cdf(-c, df, ncp))
    return float(stats.nct.sf(c, df, ncp)) + (lower if math.isfinite(lower) else 0.0)


def seeds_needed(
    effect: float, paired: bool, alpha: float = ALPHA, target: float = POWER
) -> int | None:
    """The smallest number of seeds (per method) at which a two-sided t-test at ``alpha``
    detects a standardised ``effect`` with probability ``target`` (:func:`power`): None for no
    effect, ``MAX_SEEDS + 1`` when even ``MAX_SEEDS`` do not."""
    if effect == 0:
        return None
    if math.isinf(effect):
        return 2

    def enough(n: int) -> bool:
        return power(effect, n, paired, alpha) >= target

    low, high = 1, 2  # enough(high) once found; never enough(low) (1 seed tests nothing)
    while not enough(high):
        if high > MAX_SEEDS:
            return MAX_SEEDS + 1
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (``statsmodels``' ``multipletests(method="holm")``)."""
    from statsmodels.stats.multitest import multipletests  # heavy: only when asked

    if not pvalues:
        return []
    return [float(p) for p in multipletests(list(pvalues), method="holm")[1]]


def corrected(differences: Sequence[Difference]) -> list[Difference]:
    """``differences`` with their Holm-adjusted p-values over the whole family."""
    adjusted = holm([d.p for d in differences])
    return [replace(d, p_adjusted=p) for d, p in zip(differences, adjusted, strict=True)]


@dataclass(frozen=True)
class Compared:
    """``a`` against ``other`` in one cell (dataset, ratio): their means and seed counts, and
    the test (None where either has fewer than 2 seeds)."""

    dataset: str
    ratio: float
    other: str
    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    difference: Difference | None


def compare_methods(
    samples: Mapping[tuple[str, float, str], Sample],
    a: str,
    others: Sequence[str],
    interval: IntervalSpec | None = None,
    power: float = POWER,
) -> list[Compared]:
    """``a`` against each of ``others`` in every (dataset, ratio) both have (``samples``:
    (dataset, ratio, method) -> its values by seed); uncorrected (:func:`holm_compared`)."""
    cells = sorted({(d, r) for d, r, m in samples if m == a})
    found = []
    for other in others:
        for dataset, ratio in cells:
            x, y = samples[(dataset, ratio, a)], samples.get((dataset, ratio, other))
            if y is not None:
                diff = difference(x, y, interval, power)
                found.append(Compared(dataset, ratio, other, x.mean, y.mean, x.n, y.n, diff))
    return found


def holm_compared(compared: Sequence[Compared]) -> list[Compared]:
    """``compared`` with Holm-adjusted p-values over all of its tests."""
    adjusted = iter(corrected([c.difference for c in compared if c.difference is not None]))
    return [c if c.difference is None else replace(c, difference=next(adjusted)) for c in compared]
