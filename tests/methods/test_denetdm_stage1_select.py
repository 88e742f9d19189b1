"""DeNetDM's stage-1 criteria: ``valid_conflicting`` (the pooled bias-conflicting images, what
``official`` runs) and ``valid_conflicting_groups`` (the official code's ``accs[eye == 0].mean()``
over the (class, bias) groups, ``train_decam_stage1.py``)."""

from __future__ import annotations

import pytest
import torch

from debias_bench.config.run_config import make_config, resolve_hparams
from debias_bench.errors import ConfigError
from debias_bench.methods import denetdm as denetdm_module
from debias_bench.methods.denetdm import DeNetDM, conflicting_group_mean
from debias_bench.registry import DATASETS
from debias_bench.training.method import TrainEnv
from debias_bench.training.metrics import accuracy_metrics

CPU = torch.device("cpu")


def test_conflicting_group_mean_by_hand():
    groups = [[100.0, 50.0, None], [20.0, 90.0, 0.0], [None, None, 80.0]]
    assert conflicting_group_mean(groups) == pytest.approx((50.0 + 20.0 + 0.0) / 3)
    assert conflicting_group_mean([[100.0, None], [None, 90.0]]) is None


def test_the_group_mean_differs_from_the_pooled_accuracy_when_groups_differ_in_size():
    """Two classes: the conflicting group (0, 1) has 1 image of 1 right, (1, 0) 3 images of 0
    right: pooled 25 %, the groups' mean 50 %."""
    labels = torch.tensor([0, 1, 1, 1, 0, 1])
    biases = torch.tensor([1, 0, 0, 0, 0, 1])
    preds = torch.tensor([0, 0, 0, 0, 0, 1])
    metrics = accuracy_metrics(preds, labels, biases, 2, 2)
    assert metrics["conflicting_accuracy"] == pytest.approx(25.0)
    assert conflicting_group_mean(metrics["group_accuracy"]) == pytest.approx(50.0)


@pytest.mark.parametrize(
    ("select", "expected"), [("valid_conflicting", 25.0), ("valid_conflicting_groups", 50.0)]
)
def test_stage1_scores_the_shallow_branch_by_its_criterion(monkeypatch, select, expected):
    labels = torch.tensor([0, 1, 1, 1, 0, 1])
    biases = torch.tensor([1, 0, 0, 0, 0, 1])
    metrics = accuracy_metrics(torch.tensor([0, 0, 0, 0, 0, 1]), labels, biases, 2, 2)
    monkeypatch.setattr(denetdm_module, "evaluate_split", lambda *args: metrics)
    spec = DATASETS.get("toy").spec
    hp = {**resolve_hparams("denetdm", "toy", protocol="clean"), "stage1_select": select}
    method = DeNetDM(spec, hp, TrainEnv(CPU, 512, 16, 40, 0))
    splits = DATASETS.get("toy")("/nonexistent", "/nonexistent").load(20)
    assert method._shallow_conflicting(splits) == pytest.approx(expected)


def test_official_keeps_the_pooled_criterion_and_the_groups_one_is_a_declared_choice():
    assert resolve_hparams("denetdm", "cmnist")["stage1_select"] == "valid_conflicting"
    assert resolve_hparams("denetdm", "cmnist", protocol="clean")["stage1_select"] == "last"
    groups = make_config(
        "denetdm", "cmnist", 1, 0, overrides={"stage1_select": "valid_conflicting_groups"}
    )
    assert groups.run_id != make_config("denetdm", "cmnist", 1, 0).run_id
    with pytest.raises(ConfigError):
        make_config("denetdm", "cmnist", 1, 0, overrides={"stage1_select": "valid_groups"})


def test_stage1_keeps_the_epoch_its_criterion_picks(monkeypatch):
    """Scores per epoch end: the kept stage-1 state is the first epoch with the highest score."""
    spec = DATASETS.get("toy").spec
    hp = {
        **resolve_hparams("denetdm", "toy", protocol="clean"),
        "stage1_select": "valid_conflicting_groups",
        "batch_size": 32,
    }
    torch.manual_seed(0)
    method = DeNetDM(spec, hp, TrainEnv(CPU, 512, 16, 64, 0))  # 4 epochs of 16 steps
    scores = iter([10.0, 40.0, 40.0, 30.0])
    states = []

    def score(self, data):
        states.append({k: v.clone() for k, v in self.stage1.state_dict().items()})
        return next(scores)

    monkeypatch.setattr(DeNetDM, "_shallow_conflicting", score)
    method.prepare(DATASETS.get("toy")("/nonexistent", "/nonexistent").load(20))
    assert len(states) == 4
    for key, value in method.stage1.state_dict().items():
        assert torch.equal(value, states[1][key])  # epoch 2, not 3 (a tie keeps the earlier)
