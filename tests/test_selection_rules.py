"""Model selection with and without bias labels: the in-distribution validation split (built
from the held-out validation images, at the training ratio), ``best_valid_iid`` and
``best_valid_worst_group``, and worst-group accuracy."""

from __future__ import annotations

import torch
from conftest import make_toy_split

from debias_bench.config.run_config import make_config
from debias_bench.config.selection import SELECTED_BY
from debias_bench.data.iid import MIN_ALIGNED, iid_valid
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run
from debias_bench.training.metrics import accuracy_metrics


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
        best = max(records, key=lambda r: r[split][metric])  # ties: the earlier, as max()
        assert result["selections"][name]["step"] == best["step"], name
