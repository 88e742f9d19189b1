"""The regression check's rule: how far one metric of one cell may drop, and what it catches.

A baseline cell holds a metric's value for each of its ``K`` seeds, all measured on the same
``n`` test images; a check trains ``M`` seeds of the cell and compares their mean with the
baseline's. The difference of the two means has the variance ``s^2 (1/M + 1/K)`` (``s`` the
seeds' standard deviation: another CPU's kernels move a run as another seed does), to which
the rule adds ``w se^2`` (``se`` the standard error of an accuracy on the ``n`` images, at the
Agresti-Coull centre ``(x + 2) / (n + 4)``; ``w`` = :data:`TEST_NOISE_WEIGHT`): a floor for what
a few seeds cannot show (a metric all seeds got 100 % right is a few images from another
count). The **allowance** is ``max(tolerance, z sigma)`` with ``sigma`` the root of that sum.

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

from debias_bench.reporting.significance import POWER

DEFAULT_TOLERANCE = 1.0
#: standard deviations of a metric's spread a drop may reach before it is a regression
DEFAULT_NOISE_Z = 4.0
#: the weight of the test-set variance beside the seeds' own (see the module docstring): with 1,
#: each seed of the image sets left out of a baseline of the other 4 drops 4.06 of the check's
#: standard deviations (Dogs & Cats; 2 alarms in 260), with 2 at most 3.46; the power on
#: Colored MNIST is the same (docs/regression.md, "How the check was sized")
TEST_NOISE_WEIGHT = 2.0


def noise(percent: float, n: int | None, z: float) -> float:
    """``z`` standard errors (points) of an accuracy of ``percent`` % measured on ``n``
    images, at the Agresti-Coull centre ``(x + 2) / (n + 4)`` (``x`` the images right): an
    accuracy of 99 or 100 % is a few errors from another count, not a certainty."""
    if not n or z <= 0:
        return 0.0
    p = min(max(percent / 100, 0.0), 1.0)
    centre = (p * n + 2) / (n + 4)
    return z * 100 * math.sqrt(centre * (1 - centre) / (n + 4))


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
    def test_se(self) -> float:
        """The standard error (points) of the baseline's mean accuracy on the ``n`` images."""
        return noise(self.mean, self.n, 1.0)

    @property
    def test_var(self) -> float:
        return self.test_weight * self.test_se**2

    @property
    def sigma(self) -> float:
        """One standard deviation of the check's difference."""
        return math.sqrt(self.seeds_var + self.test_var)

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
        if self.n is None:
            lines.append("test images: not known; test-set term 0")
        else:
            lines.append(
                f"test-set term w se^2 = {self.test_weight:g} x {self.test_se:.3f}^2 = "
                f"{self.test_var:.4f}  (se of {self.mean:.2f} % on n = {self.n} images, "
                "Agresti-Coull centre)"
            )
        lines.append(f"sigma = sqrt({self.seeds_var:.4f} + {self.test_var:.4f}) = {self.sigma:.3f}")
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
