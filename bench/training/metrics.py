"""Evaluation metrics (all accuracies in percent); the selection rules are in
:mod:`debias_bench.config.selection`."""

from __future__ import annotations

import copy
from typing import Any

import torch

from debias_bench.config.selection import (
    FALLBACK_SPLIT,
    SELECTED_BY,
    better,
    class_difference,
    worst_group,
)
from debias_bench.data.contract import Split, eval_batches
from debias_bench.data.spec import DatasetSpec
from debias_bench.errors import FailReason, RunFailure


@torch.inference_mode()
def predict_labels(
    predict: Any, split: Split, spec: DatasetSpec, batch_size: int, device: torch.device
) -> torch.Tensor:
    """Arg-max predictions of ``predict(x) -> logits`` over a split, on the CPU (gathered on
    the device and copied once: one synchronisation per split, not one per batch)."""
    preds, finite = [], torch.ones((), dtype=torch.bool, device=device)
    for batch in eval_batches(split, spec, batch_size, device):
        logits = predict(batch.x)
        _check_shape(logits, len(batch.x), spec.num_classes)
        finite &= torch.isfinite(logits).all()  # checked once per split: no sync per batch
        preds.append(logits.argmax(1))
    if not bool(finite):
        raise RunFailure(FailReason.BAD_PREDICTIONS, "predict() returned non-finite logits")
    return torch.cat(preds).cpu() if preds else torch.empty(0, dtype=torch.long)


def _check_shape(logits: Any, n: int, num_classes: int) -> None:
    """A method's ``predict`` must give one row of ``num_classes`` logits per image."""
    shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else None
    if shape != (n, num_classes) or not logits.is_floating_point():
        what = f"a {type(logits).__name__}" if shape is None else f"{logits.dtype} of shape {shape}"
        raise RunFailure(
            FailReason.BAD_PREDICTIONS,
            f"predict() returned {what} for {n} images; expected float logits of shape "
            f"({n}, {num_classes})",
        )


@torch.no_grad()  # not inference mode: the NC analysis works on these tensors in place
def collect_features(
    features: Any, split: Split, spec: DatasetSpec, batch_size: int, device: torch.device
) -> torch.Tensor:
    """``features(x)`` over a split (unaugmented), on the CPU."""
    batches = eval_batches(split, spec, batch_size, device)
    return torch.cat([features(batch.x).float().cpu() for batch in batches])


def _pct(correct: torch.Tensor) -> float | None:
    return float(correct.float().mean() * 100.0) if len(correct) else None


def _pcts(hits: torch.Tensor, counts: torch.Tensor) -> list[float | None]:
    """Per bin, ``hits / counts`` in percent, as :func:`_pct` gives it for that bin's images
    (the float32 mean of 0/1 values is the exact count over n, rounded once): None where a
    bin is empty."""
    pct = hits.float() / counts.clamp(min=1).float() * 100.0
    return [float(p) if n else None for p, n in zip(pct.tolist(), counts.tolist(), strict=True)]


def accuracy_metrics(
    preds: torch.Tensor,
    labels: torch.Tensor,
    biases: torch.Tensor,
    num_classes: int,
    num_biases: int,
) -> dict[str, Any]:
    """Accuracy overall, on bias-aligned (bias == label) and bias-conflicting samples, per
    class, per (class, bias) group, and the mean over non-empty groups (LfF's unbiased metric);
    the worst class and the class-difference criterion (:mod:`debias_bench.config.selection`)
    read class labels only. Groups and classes are counted in one pass each (``bincount``)."""
    correct = preds == labels
    aligned = labels == biases
    known = (labels >= 0) & (labels < num_classes)  # an image outside them is in no group
    grouped = known & (biases >= 0) & (biases < num_biases)
    cells = num_classes * num_biases
    groups = (labels * num_biases + biases)[grouped]
    in_group = torch.bincount(groups, minlength=cells)
    flat = _pcts(torch.bincount(groups[correct[grouped]], minlength=cells), in_group)
    group = [flat[c * num_biases : (c + 1) * num_biases] for c in range(num_classes)]
    counts = in_group.view(num_classes, num_biases).tolist()
    filled = [acc for row in group for acc in row if acc is not None]
    worst, worst_at, n_worst = worst_group(group, counts)
    classes = labels[known]
    per_class = _pcts(
        torch.bincount(classes[correct[known]], minlength=num_classes),
        torch.bincount(classes, minlength=num_classes),
    )
    present = [acc for acc in per_class if acc is not None]
    return {
        "accuracy": _pct(correct),
        "aligned_accuracy": _pct(correct[aligned]),
        "conflicting_accuracy": _pct(correct[~aligned]),
        "group_mean_accuracy": sum(filled) / len(filled) if filled else None,
        "per_class_accuracy": per_class,
        "worst_class_accuracy": min(present) if present else None,
        "class_diff": class_difference(per_class),
        "group_accuracy": group,
        "group_counts": counts,
        "worst_group_accuracy": worst,
        "worst_group": worst_at,  # [class, bias]
        "n_worst_group": n_worst,
        "n": len(labels),
        "n_aligned": int(aligned.sum()),
        "n_conflicting": int((~aligned).sum()),
    }


def evaluate_split(
    predict: Any, split: Split, spec: DatasetSpec, batch_size: int, device: torch.device
) -> dict[str, Any]:
    preds = predict_labels(predict, split, spec, batch_size, device)
    return accuracy_metrics(preds, split.labels, split.biases, spec.num_classes, spec.num_biases)


class SelectionTracker:
    """Keeps, for each protocol, the evaluation it selects.

    ``last``: the final evaluation (LfF, ETF-Debias). ``best_valid``: highest validation
    accuracy. ``best_test``: highest test accuracy, an oracle that DisEnt, BiasEnsemble and
    SelecMix report; recorded so they can be compared, never the default. The others: see
    :data:`~debias_bench.config.selection.SELECTED_BY` (a rule whose split a record lacks reads
    its fallback split, if it has one, and its entry names the split). Ties keep the earlier.
    """

    def __init__(self) -> None:
        self.selected: dict[str, dict[str, Any]] = {}

    def update(self, record: dict[str, Any]) -> None:
        kept = ("step", "epoch", "valid", "test", "valid_iid")
        entry = {k: copy.deepcopy(record[k]) for k in kept if k in record}
        self.selected["last"] = entry
        for name, (split, metric) in SELECTED_BY.items():
            fallback = split not in record and name in FALLBACK_SPLIT
            split = FALLBACK_SPLIT[name] if fallback else split  # a run has the split or not
            value = (record.get(split) or {}).get(metric)
            if value is None:
                continue
            best = self.selected.get(name)
            if best is None or better(metric, value, best[split][metric]):
                self.selected[name] = {**entry, "split": split} if fallback else entry

    def state_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.selected)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.selected = copy.deepcopy(state)
