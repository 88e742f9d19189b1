"""Model-selection rules: which evaluation of a run each rule reports, and what it reads.

Every result records one evaluation per rule (``selections.<rule>`` of ``result.json``).

Two rules read only class labels of the in-distribution validation split (the held-out images at
the training ratio, :mod:`debias_bench.data.iid`), so they need no bias label:

* ``best_valid_worst_class``: the highest worst-class accuracy (the lowest per-class accuracy
  over the classes present), SubpopBench's worst-class model selection (Yang et al., Change is
  Hard: A Closer Look at Subpopulation Shift, ICML 2023).
* ``best_valid_class_diff``: the lowest class-difference criterion, the mean absolute difference
  between the per-class accuracies over all pairs of classes present. Its source is BAM's
  ``ClassDiff`` stopping criterion (Li, Liu and Hu, Bias Amplification Enhances Minority Group
  Performance, TMLR 2024; ``motivationss/BAM`` @ dba35b1, ``loss.py``, ``helper``), which is
  ``|acc_1 - acc_2|`` for two classes; with more classes BAM's code sums its 3-class
  MultiNLI case as ``|2 acc_1 - acc_2 - acc_3|``; here every pair counts once
  (:func:`class_difference`), which equals BAM's for two classes.

Where a dataset's validation split gives no in-distribution split (no bias-aligned images, as
BAR's conflicting-only release), these two rules read the validation split's class labels
instead (:data:`FALLBACK_SPLIT`): still no bias label is read, and the selected entry says which
split it read (``split``)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

#: model-selection rules; every result has the first three (older results lack the others)
SELECTIONS = (
    "last",
    "best_valid",
    "best_test",
    "best_valid_worst_group",
    "best_valid_iid",
    "best_valid_worst_class",
    "best_valid_class_diff",
)
REQUIRED_SELECTIONS = SELECTIONS[:3]
#: selection -> (split, metric) it optimises (``last`` takes the final evaluation); the metrics
#: of :data:`LOWER_IS_BETTER` are minimised, every other one maximised
SELECTED_BY = {
    "best_valid": ("valid", "accuracy"),
    "best_test": ("test", "accuracy"),
    "best_valid_worst_group": ("valid", "worst_group_accuracy"),
    "best_valid_iid": ("valid_iid", "accuracy"),  # no bias labels: see debias_bench.data.iid
    "best_valid_worst_class": ("valid_iid", "worst_class_accuracy"),  # class labels only
    "best_valid_class_diff": ("valid_iid", "class_diff"),  # class labels only
}
#: metrics a selection minimises
LOWER_IS_BETTER = frozenset({"class_diff"})
#: rule -> the split it reads where a run has no in-distribution split (class labels only)
FALLBACK_SPLIT = {"best_valid_worst_class": "valid", "best_valid_class_diff": "valid"}


def better(metric: str, value: float, best: float) -> bool:
    """Whether ``value`` of ``metric`` beats ``best`` strictly (ties keep the earlier)."""
    return value < best if metric in LOWER_IS_BETTER else value > best


def class_difference(per_class: list[float | None]) -> float | None:
    """The mean of ``|acc_i - acc_j|`` over the pairs of classes present (None: fewer than two;
    for two classes BAM's ``ClassDiff``, ``|acc_1 - acc_2|``)."""
    present = [acc for acc in per_class if acc is not None]
    pairs = list(combinations(present, 2))
    if not pairs:
        return None
    return sum(abs(a - b) for a, b in pairs) / len(pairs)


def worst_group(
    group_accuracy: list[list[float | None]], group_counts: list[list[int]] | None = None
) -> tuple[float | None, list[int] | None, int | None]:
    """(accuracy, [class, bias], images) of the (class x bias) group with the lowest accuracy
    among those present in the split (ties: the first); Nones when no group is present.
    ``group_counts`` is None for results recorded before counts were (the count is None)."""
    present = [
        (acc, [c, b])
        for c, row in enumerate(group_accuracy or [])
        for b, acc in enumerate(row)
        if acc is not None
    ]
    if not present:
        return None, None, None
    acc, (c, b) = min(present, key=lambda item: item[0])
    n = group_counts[c][b] if group_counts else None
    return acc, [c, b], n


def adjusted_average(
    group_accuracy: Sequence[Sequence[float | None]], weights: Sequence[Sequence[int]]
) -> float | None:
    """Test group accuracies weighted by the training groups' sizes ``weights`` (Sagawa et
    al.'s and DFR's "adjusted average" on Waterbirds, whose test split is group-balanced);
    None when a weighted group has no accuracy (absent from the split): a number over fewer
    groups would not be the one they report."""
    total, weighted = 0, 0.0
    for row, counts in zip(group_accuracy, weights, strict=True):
        for acc, n in zip(row, counts, strict=True):
            if n and acc is None:
                return None
            if n:
                total += n
                weighted += n * float(acc or 0.0)
    return weighted / total if total else None
