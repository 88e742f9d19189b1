"""The regression check's rule: how far one metric of one cell may drop, and what it catches.

A baseline cell holds a metric's value for each of its ``K`` seeds, all measured on the same
``n`` test images; a check trains ``M`` seeds of the cell and compares their mean with the
baseline's. The difference of the two means has the variance ``s^2 (1/M + 1/K)`` (``s`` the
seeds' standard deviation: another CPU's kernels move a run as another seed does), to which
the rule adds ``w se^2`` (``se`` the standard error of an accuracy on the ``n`` images, at the
Agresti-Coull centre ``(x + 2) / (n + 4)``; ``w`` = :data:`TEST_NOISE_WEIGHT`): a floor for what
a few seeds cannot show (a metric all seeds got 100 % right is a few images from another
count). The **allowance** is ``max(tolerance, z sigma)`` with ``sigma`` the root of that sum.

**Paired by seed.** A baseline may also hold, for its seeds, the values the same runs gave under
other SIMD kernels (``bench regress kernels``). Those pairs measure ``tau``, how far another
CPU moves *the same seed*: for most methods a last-bit difference stays a last-bit difference
(Vanilla, ETF-Debias, LfF: ``tau`` 0.01-0.1 points against seeds 1-2.6 apart), for chaotic ones
it becomes another seed (LC, SelecMix: ``tau`` about ``s sqrt 2``). When the new runs are seeds
the baseline holds, the check may then compare them with *their own* recorded values:
the difference of the two means has the variance ``tau_u^2 / M``, with ``tau_u^2`` the
one-sided 95 % upper bound of ``tau^2`` over a setting's ``P`` pairs (``tau^2 P /
chi2_0.05(P)``: a few pairs that happen to agree cannot make it small), the largest over the
settings recorded: one setting may move a method far more than another (SelecMix's test
accuracy: 0.65 points under ``avx2``, 4.07 under ``default``), and an unseen CPU is assumed no
kinder than the worst. The rule takes the smaller of the two variances, seeds' or pairs', for
each metric from the baseline alone, before it sees the new runs, and keeps the test-set
floor on either.

The **minimum detectable drop** (MDD) is the true drop of the cell's mean that the check flags
with probability :data:`~debias_bench.reporting.significance.POWER` (80 %): the observed drop
is about normal around the true one with standard deviation ``sigma`` (the rule's own, the
floor included, so the MDD errs on the large side), so it is ``allowance + Phi^-1(0.8) sigma``
(``scipy.stats.norm``). Both shrink with more check seeds (``M``), more baseline seeds (``K``)
and more test images (``n``); docs/regression.md measures which of these pays on which dataset.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import cache

from debias_bench.reporting.significance import POWER

DEFAULT_TOLERANCE = 1.0
#: standard deviations of a metric's spread a drop may reach before it is a regression
DEFAULT_NOISE_Z = 4.0
#: the weight of the test-set variance beside the seeds' own (see the module docstring): with 1,
#: each seed of the image sets left out of a baseline of the other 4 drops 4.06 of the check's
#: standard deviations (Dogs & Cats; 2 alarms in 260), with 2 at most 3.46; the power on
#: Colored MNIST is the same (docs/regression.md, "How the check was sized")
TEST_NOISE_WEIGHT = 2.0
#: the confidence of the upper bound on the kernels' variance ``tau^2`` (the module docstring)
KERNEL_CONFIDENCE = 0.95


def noise(percent: float, n: int | None, z: float) -> float:
    """``z`` standard errors (points) of an accuracy of ``percent`` % measured on ``n``
    images, at the Agresti-Coull centre ``(x + 2) / (n + 4)`` (``x`` the images right): an
    accuracy of 99 or 100 % is a few errors from another count, not a certainty."""
    if not n or z <= 0:
        return 0.0
    p = min(max(percent / 100, 0.0), 1.0)
    centre = (p * n + 2) / (n + 4)
    return z * 100 * math.sqrt(centre * (1 - centre) / (n + 4))


@cache
def _chi2_low(pairs: int) -> float:
    from scipy import stats  # ~1 s to import: only when a check runs

    return float(stats.chi2.ppf(1 - KERNEL_CONFIDENCE, pairs))


def kernel_var_bound(kernels: tuple[tuple[float, ...], ...]) -> float:
    """The largest over the kernel settings of the one-sided upper bound, at
    :data:`KERNEL_CONFIDENCE`, of ``tau^2``, the mean square of the differences a seed's metric
    took under that setting (points^2): ``sum d^2 / chi2_{1-c}(P)`` for its ``P`` pairs (the
    mean of ``d``, not estimated, is taken as 0: a drift all pairs share counts in full)."""
    return max(sum(d * d for d in diffs) / _chi2_low(len(diffs)) for diffs in kernels if diffs)


def power_quantile(power: float = POWER) -> float:
    """``Phi^-1(power)``: how many standard deviations beyond the allowance a true drop must
    lie to be flagged with probability ``power`` (``scipy.stats.norm``)."""
    from scipy import stats  # ~1 s to import: only when a check runs

    return float(stats.norm.ppf(power))


@dataclass(frozen=True)
class Allowance:
    """The drop one metric of one cell may take, and every term behind it."""

    recorded: tuple[float, ...]  # the baseline's value per seed (K of them)
    runs: int  # M: the new runs of the cell the check averages
    n: int | None  # the test images the new runs measured the metric on (None: not known)
    tolerance: float = DEFAULT_TOLERANCE
    z: float = DEFAULT_NOISE_Z
    test_weight: float = TEST_NOISE_WEIGHT
    power: float = POWER
    #: per kernel setting, its value minus this one's for each recorded seed (P pairs)
    kernels: tuple[tuple[float, ...], ...] = ()
    #: the baseline's values of the new runs' own seeds (None: a new run's seed is not recorded)
    own: tuple[float, ...] | None = None

    @property
    def k(self) -> int:
        return len(self.recorded)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.recorded)

    @property
    def spread(self) -> float | None:
        """The standard deviation over the baseline's seeds (ddof 1; None for one seed)."""
        return statistics.stdev(self.recorded) if self.k > 1 else None

    @property
    def seeds_var(self) -> float:
        """``s^2 (1/M + 1/K)``: the variance of the difference of the two means of seeds."""
        return (self.spread or 0.0) ** 2 * (1 / max(self.runs, 1) + 1 / self.k)

    @property
    def pairs_var(self) -> float | None:
        """``tau_u^2 / M``: the variance of the mean difference of the new runs from their own
        seeds' recorded values (None: no kernel pairs, or a new run's seed is not recorded)."""
        if not any(self.kernels) or self.own is None:
            return None
        return kernel_var_bound(self.kernels) / max(self.runs, 1)

    @property
    def paired(self) -> bool:
        """Whether the check compares each new run with its own seed's recorded value: when
        the kernel pairs bound that difference tighter than the seeds' spread does."""
        pairs = self.pairs_var
        return pairs is not None and pairs < self.seeds_var

    @property
    def reference(self) -> float:
        """What the new runs' mean is compared with: the mean of their own seeds' recorded
        values (paired) or of all ``K`` seeds'."""
        return statistics.fmean(self.own) if self.paired and self.own else self.mean

    @property
    def test_se(self) -> float:
        """The standard error (points) of the baseline's mean accuracy on the ``n`` images."""
        return noise(self.mean, self.n, 1.0)

    @property
    def test_var(self) -> float:
        return self.test_weight * self.test_se**2

    @property
    def sigma(self) -> float:
        """One standard deviation of the check's difference."""
        pairs = self.pairs_var
        design = pairs if self.paired and pairs is not None else self.seeds_var
        return math.sqrt(design + self.test_var)

    @property
    def allowed(self) -> float:
        return max(self.tolerance, self.z * self.sigma)

    @property
    def mdd(self) -> float:
        """The true drop flagged with probability ``power`` (the module docstring)."""
        return self.allowed + power_quantile(self.power) * self.sigma

    def explain(self) -> list[str]:
        """How the allowance and the MDD were computed, one line per step, with the numbers."""
        values = ", ".join(f"{v:g}" for v in self.recorded)
        spread = self.spread
        lines = [f"baseline: K = {self.k} seed(s): {values}; mean {self.mean:.3f}"]
        if spread is None:
            lines.append("s: none (one seed): the seeds' term is 0; record several seeds")
        else:
            lines.append(f"s = {spread:.3f} (standard deviation over the K seeds, ddof 1)")
        lines.append(
            f"seeds' term s^2 (1/M + 1/K) = {spread or 0:.3f}^2 x (1/{self.runs} + 1/{self.k})"
            f" = {self.seeds_var:.4f}  (M = {self.runs} new run(s) averaged)"
        )
        lines += self._explain_pairs()
        if self.n is None:
            lines.append("test images: not known; test-set term 0")
        else:
            lines.append(
                f"test-set term w se^2 = {self.test_weight:g} x {self.test_se:.3f}^2 = "
                f"{self.test_var:.4f}  (se of {self.mean:.2f} % on n = {self.n} images, "
                "Agresti-Coull centre)"
            )
        design = self.pairs_var if self.paired else self.seeds_var
        lines.append(f"sigma = sqrt({design:.4f} + {self.test_var:.4f}) = {self.sigma:.3f}")
        floor = " (the tolerance)" if self.allowed == self.tolerance else ""
        lines.append(
            f"allowance = max(tolerance {self.tolerance:g}, z {self.z:g} x sigma "
            f"{self.sigma:.3f}) = {self.allowed:.2f} points{floor}"
        )
        lines.append(
            f"minimum detectable drop ({self.power * 100:g} % power) = allowance + "
            f"{power_quantile(self.power):.3f} x sigma = {self.mdd:.2f} points"
        )
        return lines

    def _explain_pairs(self) -> list[str]:
        """The kernel pairs' lines of :meth:`explain`: tau, its bound, and the design taken."""
        if not any(self.kernels):
            return ["kernel pairs: none recorded (bench regress kernels): the seeds' term it is"]
        settings = "; ".join(
            f"P = {len(d)}, tau = {math.sqrt(sum(x * x for x in d) / len(d)):.3f}"
            for d in self.kernels
            if d
        )
        bound = kernel_var_bound(self.kernels)
        lines = [
            f"kernel pairs (per setting: root mean square of its value minus this one's, same "
            f"seed): {settings}; {KERNEL_CONFIDENCE * 100:g} % upper bound tau_u^2 = "
            f"{bound:.4f} (the largest over the settings)"
        ]
        if self.own is None:
            lines.append("pairs' term: not used (a new run's seed is not in the baseline)")
        elif self.paired:
            lines.append(
                f"pairs' term tau_u^2 / M = {bound:.4f} / {self.runs} = {self.pairs_var:.4f} < "
                f"the seeds' term: paired, against the new runs' own seeds' mean "
                f"{self.reference:.3f}"
            )
        else:
            lines.append(
                f"pairs' term tau_u^2 / M = {self.pairs_var:.4f} >= the seeds' term: the "
                "seeds' term it is, against the K seeds' mean"
            )
        return lines
