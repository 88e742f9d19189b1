"""Model selection with and without bias labels: the in-distribution validation split (built
from the held-out validation images, at the training ratio), ``best_valid_iid``,
``best_valid_worst_group``, ``best_valid_worst_class`` and ``best_valid_class_diff``, and
worst-group accuracy."""

from __future__ import annotations

import pytest
import torch
from support.toy import make_toy_split

from debias_bench.config.run_config import make_config
from debias_bench.config.selection import (
    FALLBACK_SPLIT,
    LOWER_IS_BETTER,
    SELECTED_BY,
    class_difference,
)
from debias_bench.data.iid import MIN_ALIGNED, iid_valid
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run
from debias_bench.training.metrics import SelectionTracker, accuracy_metrics


def test_iid_split_keeps_every_aligned_image_and_the_training_ratio_of_conflicting_ones():
    valid = make_toy_split(2000, 0.75, 2, "valid")
    iid, note = iid_valid(valid, 5.0, seed=0)
    assert iid is not None and "training ratio 5 %" in note
    assert int(iid.aligned.sum()) == int(valid.aligned.sum())
    share = float((~iid.aligned).float().mean())
    assert abs(share - 0.05) < 0.002
    assert set(iid.indices.tolist()) <= set(valid.indices.tolist())
    again, _ = iid_valid(valid, 5.0, seed=0)
    assert torch.equal(again.indices, iid.indices)  # seeded: the same split on resume
    other, _ = iid_valid(valid, 5.0, seed=1)
    assert not torch.equal(other.indices, iid.indices)


def test_no_iid_split_from_a_conflicting_only_validation_split():
    valid = make_toy_split(400, 1.0, 2, "valid")  # every image bias-conflicting
    iid, why = iid_valid(valid, 1.0, seed=0)
    assert iid is None and f"(< {MIN_ALIGNED})" in why


def test_worst_group_is_the_lowest_group_present_and_named():
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    biases = torch.tensor([0, 0, 1, 1, 1, 0])
    preds = torch.tensor([0, 0, 1, 1, 1, 1])  # group (0, 1) wrong, (1, 0) right
    m = accuracy_metrics(preds, labels, biases, num_classes=2, num_biases=2)
    assert m["worst_group_accuracy"] == 0.0 and m["worst_group"] == [0, 1]
    assert m["n_worst_group"] == 1 and m["group_counts"] == [[2, 1], [1, 2]]


def test_each_selection_picks_the_evaluation_that_maximises_its_metric(tmp_path, toy_place):
    config = make_config(
        "vanilla", "toy", 20, 0, protocol="clean", overrides={"steps": 40, "eval_every": 4}
    )
    run = RunStore(tmp_path).run(config.run_id)
    result = train_run(config, run, toy_place, torch.device("cpu"))
    records = run.metrics()
    assert all("valid_iid" in r for r in records)
    assert "bias-conflicting" in result["valid_iid"]
    for name, (split, metric) in SELECTED_BY.items():
        sign = -1 if metric in LOWER_IS_BETTER else 1
        best = max(records, key=lambda r: sign * r[split][metric])  # ties: the earlier
        assert result["selections"][name]["step"] == best["step"], name


def test_worst_class_and_class_difference_by_hand():
    """Per-class accuracy 100 / 50 / 0 (class 3 absent): worst class 0; the class difference is
    the mean over the 3 pairs of |a_i - a_j|: (50 + 100 + 50) / 3; two classes: |a_1 - a_2|
    (BAM's ClassDiff)."""
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    preds = torch.tensor([0, 0, 1, 0, 0, 1])
    m = accuracy_metrics(preds, labels, labels.clone(), num_classes=4, num_biases=4)
    assert m["per_class_accuracy"] == [100.0, 50.0, 0.0, None]
    assert m["worst_class_accuracy"] == 0.0
    assert m["class_diff"] == pytest.approx(200.0 / 3)
    assert class_difference([80.0, 55.0]) == 25.0 and class_difference([70.0, None]) is None


def _record(step, valid_iid=None, valid=None):
    metrics = {"accuracy": 50.0, "worst_group_accuracy": 0.0}
    record = {"step": step, "valid": {**metrics, **(valid or {})}, "test": dict(metrics)}
    if valid_iid is not None:
        record["valid_iid"] = {**metrics, **valid_iid}
    return record


def test_class_diff_is_minimised_worst_class_maximised_ties_keep_the_earlier():
    tracker = SelectionTracker()
    for step, (worst, diff) in enumerate([(10.0, 30.0), (40.0, 30.0), (40.0, 5.0), (20.0, 8.0)]):
        tracker.update(_record(step, {"worst_class_accuracy": worst, "class_diff": diff}))
    assert tracker.selected["best_valid_worst_class"]["step"] == 1
    assert tracker.selected["best_valid_class_diff"]["step"] == 2
    assert "split" not in tracker.selected["best_valid_class_diff"]


def test_class_label_rules_read_the_validation_split_without_an_iid_one():
    """A run without an in-distribution split (BAR's conflicting-only validation): the two
    class-label rules read the validation split and say so; best_valid_iid stays absent."""
    tracker = SelectionTracker()
    for step, worst in enumerate([30.0, 60.0, 45.0]):
        tracker.update(_record(step, valid={"worst_class_accuracy": worst, "class_diff": 1.0}))
    chosen = tracker.selected["best_valid_worst_class"]
    assert chosen["step"] == 1 and chosen["split"] == "valid"
    assert tracker.selected["best_valid_class_diff"]["step"] == 0
    assert "best_valid_iid" not in tracker.selected
    assert set(FALLBACK_SPLIT) == {"best_valid_worst_class", "best_valid_class_diff"}
