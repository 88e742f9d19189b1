"""``accuracy_metrics`` counts its groups and classes in one ``bincount`` each; every number it
gives is, bit for bit, the float32 mean of the 0/1 hits of that group's images (the definition,
written here mask by mask), so a recorded baseline and a new run agree to the last bit."""

from __future__ import annotations

import torch

from debias_bench.training.metrics import accuracy_metrics


def _pct(hits: torch.Tensor) -> float | None:
    return float(hits.float().mean() * 100.0) if len(hits) else None


#: what the counting gives; the rest of the metrics (the mean over groups, the worst group and
#: class, the class difference) is computed from these
COUNTED = ("group_accuracy", "group_counts", "per_class_accuracy")


def _by_masks(preds, labels, biases, num_classes: int, num_biases: int) -> dict:
    """The counted metrics from one boolean mask per class and per (class, bias) group."""
    correct = preds == labels
    masks = [[(labels == c) & (biases == b) for b in range(num_biases)] for c in range(num_classes)]
    return {
        "group_accuracy": [[_pct(correct[m]) for m in row] for row in masks],
        "group_counts": [[int(m.sum()) for m in row] for row in masks],
        "per_class_accuracy": [_pct(correct[labels == c]) for c in range(num_classes)],
    }


def test_group_counts_in_one_pass_give_each_masks_numbers_bit_for_bit():
    """Random splits of 0-15,000 images over 2-11 classes and 1-11 biases, some with a bias
    label outside ``num_biases`` (-1, or one past: in no group), empty groups and classes."""
    generator = torch.Generator().manual_seed(0)
    for trial in range(120):
        n = int(torch.randint(0, 15_000, (), generator=generator))
        classes = int(torch.randint(2, 12, (), generator=generator))
        biases_n = int(torch.randint(1, 12, (), generator=generator))
        low, high = (-1 if trial % 3 == 0 else 0), biases_n + (trial % 5 == 0)
        labels = torch.randint(0, classes - (trial % 7 == 0), (n,), generator=generator)
        biases = torch.randint(low, high, (n,), generator=generator)
        hit_rate = torch.rand((), generator=generator)
        guesses = torch.randint(0, classes, (n,), generator=generator)
        preds = torch.where(torch.rand(n, generator=generator) < hit_rate, labels, guesses)
        got = accuracy_metrics(preds, labels, biases, classes, biases_n)
        counted = {key: got[key] for key in COUNTED}
        assert counted == _by_masks(preds, labels, biases, classes, biases_n), trial
