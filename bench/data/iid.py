"""The in-distribution validation split: model selection without bias labels.

Every dataset holds out a validation split, and for most it is unbiased (balanced over
biases), which only someone who knows the bias labels can build. Selecting on it
(``best_valid``) therefore uses bias labels. The in-distribution split is what a user without
bias labels would have: held-out images with the *training* ratio of bias-conflicting samples.
It is built here from the held-out validation images alone, by subsampling them to the
training ratio (every bias-aligned image kept, a seeded subset of the conflicting ones), so no
training set, and no number of an existing run, changes. ``best_valid_iid`` selects the
evaluation with the highest average accuracy on it.

Where a validation split cannot give the training ratio (it has no bias-aligned images, as a
conflicting-only release, or no conflicting ones), there is no such split and the rule is left
out, with the reason recorded in the run's result.
"""

from __future__ import annotations

import torch

from debias_bench.data.contract import Split
from debias_bench.streams import generator

#: fewer bias-aligned validation images than this: the split would not say anything
MIN_ALIGNED = 20


def iid_valid(valid: Split, ratio_percent: float, seed: int) -> tuple[Split | None, str]:
    """(the in-distribution split, how it was built) or (None, why there is none)."""
    aligned = valid.aligned
    n_aligned = int(aligned.sum())
    conflicting_rows = torch.nonzero(~aligned).flatten()
    if n_aligned < MIN_ALIGNED:
        return None, (
            f"the validation split holds {n_aligned} bias-aligned images (< {MIN_ALIGNED}): "
            "no in-distribution split can be built from it"
        )
    fraction = ratio_percent / 100.0
    wanted = round(n_aligned * fraction / (1.0 - fraction))
    if wanted > len(conflicting_rows):
        return None, (
            f"the validation split holds {len(conflicting_rows)} bias-conflicting images; "
            f"{wanted} are needed for {ratio_percent:g} % beside its {n_aligned} aligned ones"
        )
    draw = generator(int(seed), "valid_iid")
    picked = conflicting_rows[torch.randperm(len(conflicting_rows), generator=draw)[:wanted]]
    rows = torch.sort(torch.cat([torch.nonzero(aligned).flatten(), picked])).values
    subset = valid.subset(rows)
    subset.name = "valid_iid"
    share = 100.0 * wanted / max(1, len(rows))
    note = (
        f"{len(rows)} held-out validation images: all {n_aligned} bias-aligned and {wanted} "
        f"bias-conflicting ({share:.2f} %, training ratio {ratio_percent:g} %)"
    )
    return subset, note
