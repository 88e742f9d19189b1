"""Model-selection rules: which evaluation of a run each rule reports, and what it reads.

Every result records one evaluation per rule (``selections.<rule>`` of ``result.json``)."""

from __future__ import annotations

#: model-selection rules; every result has the first three (older results lack the others)
SELECTIONS = ("last", "best_valid", "best_test", "best_valid_worst_group", "best_valid_iid")
REQUIRED_SELECTIONS = SELECTIONS[:3]
#: selection -> (split, metric) it maximises (``last`` takes the final evaluation)
SELECTED_BY = {
    "best_valid": ("valid", "accuracy"),
    "best_test": ("test", "accuracy"),
    "best_valid_worst_group": ("valid", "worst_group_accuracy"),
    "best_valid_iid": ("valid_iid", "accuracy"),  # no bias labels: see debias_bench.data.iid
}
