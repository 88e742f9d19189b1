"""Bias-label assignment for the synthetic datasets (Colored MNIST, Corrupted CIFAR-10).

LfF's ``make_attr_labels`` gives class ``c`` the bias ``c`` with probability ``1 - r`` and each
other bias with ``r / (B - 1)``, assigning rounded cumulative counts in dataset order. We keep
those proportions but draw which samples get which bias from a seeded permutation, so the
conflicting samples are a random subset of each class rather than its first images.
"""

from __future__ import annotations

import numpy as np


def _spread(total: int, slots: int, rng: np.random.Generator) -> np.ndarray:
    """Split ``total`` into ``slots`` counts that differ by at most one (extras at random)."""
    counts = np.full(slots, total // slots, dtype=np.int64)
    counts[rng.permutation(slots)[: total % slots]] += 1
    return counts


def assign_skewed(
    labels: np.ndarray, conflict_pct: float, num_biases: int, rng: np.random.Generator
) -> np.ndarray:
    """Bias labels where ``round(conflict_pct% * n_c)`` samples of each class are conflicting,
    spread evenly over the other biases; the rest carry the bias equal to their class."""
    biases = np.empty_like(labels, dtype=np.int64)
    for c in np.unique(labels):
        rows = rng.permutation(np.flatnonzero(labels == c))
        n_conflict = round(len(rows) * conflict_pct / 100.0)
        others = np.array([b for b in range(num_biases) if b != c])
        values = np.repeat(others, _spread(n_conflict, len(others), rng))
        biases[rows[:n_conflict]] = values
        biases[rows[n_conflict:]] = c
    return biases


def assign_uniform(labels: np.ndarray, num_biases: int, rng: np.random.Generator) -> np.ndarray:
    """Bias labels balanced within each class (the unbiased test protocol)."""
    biases = np.empty_like(labels, dtype=np.int64)
    for c in np.unique(labels):
        rows = rng.permutation(np.flatnonzero(labels == c))
        biases[rows] = np.repeat(np.arange(num_biases), _spread(len(rows), num_biases, rng))
    return biases
