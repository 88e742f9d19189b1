"""Ranking the methods over the cells of a table: average ranks, the Friedman test and the
Nemenyi post hoc with its critical difference (:func:`rank_test`), and why a table cannot be
ranked (:func:`rank_shortfall`). What they assume: :mod:`debias_bench.reporting.significance`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from debias_bench.reporting.intervals import ALPHA

#: a ranking (Friedman, Nemenyi, the critical-difference diagram) needs this many methods with a
#: number in every cell, and this many cells
MIN_RANKED_METHODS = 3
MIN_RANKED_CELLS = 2


@dataclass(frozen=True)
class RankTest:
    """Average ranks of methods over the cells (blocks) of a table, the Friedman test and the
    Nemenyi post hoc (p-values and critical difference)."""

    methods: tuple[str, ...]
    blocks: tuple[str, ...]
    ranks: dict[str, float]  # average rank, 1 = best
    statistic: float
    p: float
    cd: float  # Nemenyi critical difference at alpha
    nemenyi: dict[tuple[str, str], float]  # (a, b) -> p, both orders
    alpha: float = ALPHA
    left_out: tuple[str, ...] = field(default=())  # methods missing from some cell

    def describe(self, name: Any = str) -> str:
        """The ranks and tests as a caption sentence (``name`` prints a method)."""
        order = sorted(self.methods, key=lambda m: (self.ranks[m], m))
        ranks = ", ".join(f"{name(m)} {self.ranks[m]:.2f}" for m in order)
        text = (
            f"Average rank over the {len(self.blocks)} cells (1 = best mean): {ranks}; "
            f"Friedman χ²({len(self.methods) - 1}) = {self.statistic:.2f}, p = {self.p:.3g} "
            f"(chi-square approximation); Nemenyi critical difference at α = {self.alpha:g}: "
            f"{self.cd:.2f}."
        )
        if self.left_out:
            text += f" Not ranked (no number in every cell): {', '.join(map(name, self.left_out))}."
        return text


def rank_shortfall(cells: int, methods: int) -> str | None:
    """Why a table of ``cells`` cells, with ``methods`` methods that have a number in every
    one, cannot be ranked (:func:`rank_test`); None when it can."""
    if cells >= MIN_RANKED_CELLS and methods >= MIN_RANKED_METHODS:
        return None
    return (
        f"{cells} cell{'s' * (cells != 1)} and {methods} method{'s' * (methods != 1)} with a "
        f"number in every cell, where a ranking needs at least {MIN_RANKED_CELLS} cells and "
        f"{MIN_RANKED_METHODS} methods"
    )


def rank_test(grid: Mapping[str, Mapping[str, float]], alpha: float = ALPHA) -> RankTest | None:
    """``grid``: block (a cell of the table) -> method -> its mean over seeds. Methods without a
    number in every block are left out; None with fewer than ``MIN_RANKED_METHODS`` methods or
    ``MIN_RANKED_CELLS`` blocks left (:func:`rank_shortfall`)."""
    import pandas as pd
    import scikit_posthocs as sp  # heavy (seaborn, matplotlib): only when statistics are asked
    from scipy import stats  # ~1 s to import: only when statistics are asked for

    blocks = list(grid)
    methods = list(dict.fromkeys(m for b in blocks for m in grid[b]))
    full = [m for m in methods if all(_finite(grid[b].get(m)) for b in blocks)]
    if rank_shortfall(len(blocks), len(full)) is not None:
        return None
    matrix = np.array([[grid[b][m] for m in full] for b in blocks], dtype=float)
    ranks = np.vstack([stats.rankdata(-row) for row in matrix])
    statistic, p = stats.friedmanchisquare(*matrix.T)
    nemenyi = sp.posthoc_nemenyi_friedman(pd.DataFrame(matrix, columns=full))
    k, n = len(full), len(blocks)
    q = stats.studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2)
    return RankTest(
        methods=tuple(full),
        blocks=tuple(blocks),
        ranks={m: float(r) for m, r in zip(full, ranks.mean(axis=0), strict=True)},
        statistic=float(statistic),
        p=float(p),
        cd=float(q * math.sqrt(k * (k + 1) / (6 * n))),
        nemenyi={(a, b): float(nemenyi.loc[a, b]) for a in full for b in full if a != b},
        alpha=alpha,
        left_out=tuple(m for m in methods if m not in full),
    )


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
