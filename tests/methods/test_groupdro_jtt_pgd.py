"""GroupDRO, JTT and PGD: the core math on hand-made tensors, their samplers, resume, and YAML
defaults."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from support.asserts import assert_close_nested
from support.methods_helpers import CPU, assert_resumes_to_whole, toy_batch, whole_and_stopped
from torch import nn

from debias_bench.cli import main
from debias_bench.config.run_config import make_config, method_yaml, resolve_hparams
from debias_bench.data.contract import Split, to_float
from debias_bench.errors import ConfigError
from debias_bench.methods import jtt as jtt_module
from debias_bench.methods import pgd as pgd_module
from debias_bench.methods.biased import stage_steps
from debias_bench.methods.common import Classifier
from debias_bench.methods.groupdro import (
    GroupDRO,
    group_index,
    group_mean_losses,
    updated_group_weights,
)
from debias_bench.methods.jtt import JTT, upsampling_weights
from debias_bench.methods.losses import generalized_ce
from debias_bench.methods.pgd import PGD, last_layer_grad_norms, sampling_scores
from debias_bench.methods.state import SampleWeights
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.store import RunStore
from debias_bench.training.backbones import Backbone
from debias_bench.training.engine import train_run
from debias_bench.training.method import TrainEnv
from debias_bench.training.sampling import UNIFORM, GroupBalanced, Weighted

TRAIN_SIZE = 512  # the toy dataset's training split


def _env(n=TRAIN_SIZE, steps_per_epoch=16, total_steps=40, seed=0):
    return TrainEnv(CPU, n, steps_per_epoch, total_steps, seed)


LOSS_WEIGHTS = {"sampling": "loss_weights"}


def _toy_method(cls, method, env=None, **overrides):
    spec = DATASETS.get("toy").spec
    hp = {**resolve_hparams(method, "toy", protocol="clean"), **overrides}
    torch.manual_seed(0)
    return cls(spec, hp, env or _env()), spec


def _toy_splits():
    return DATASETS.get("toy")("/nonexistent", "/nonexistent").load(20)


def _sgd_step_matches(method_model, before, expected_loss):
    """With plain SGD at lr 1 the parameter change is minus the gradient of the loss."""
    grads = torch.autograd.grad(expected_loss, [*before.parameters()])
    for old, new, g in zip(before.parameters(), method_model.parameters(), grads, strict=True):
        torch.testing.assert_close(old - new, g, atol=1e-6, rtol=1e-5)


# ----------------------------------------------------------------------------- GroupDRO
def test_group_losses_and_weight_update_by_hand():
    """4 groups; batch groups (0, 0, 1, 3) with losses (1, 3, 2, 4): group means (2, 2, 0, 4),
    group 2 absent (0). eta 0.5 from uniform q: q ~ exp(0.5 * (2, 2, 0, 4)) = (e, e, 1, e^2)."""
    losses = torch.tensor([1.0, 3.0, 2.0, 4.0], dtype=torch.float64)
    groups = torch.tensor([0, 0, 1, 3])
    group_loss, counts = group_mean_losses(losses, groups, 4)
    torch.testing.assert_close(group_loss, torch.tensor([2.0, 2.0, 0.0, 4.0], dtype=torch.float64))
    assert counts.tolist() == [2, 1, 0, 1]
    q = updated_group_weights(torch.full((4,), 0.25, dtype=torch.float64), group_loss, 0.5)
    e = math.e
    expected = torch.tensor([e, e, 1.0, e * e], dtype=torch.float64) / (2 * e + 1 + e * e)
    torch.testing.assert_close(q, expected)
    # a second step from that q with all group losses 1: exp(0.5) for everyone, q unchanged
    again = updated_group_weights(q, torch.ones(4, dtype=torch.float64), 0.5)
    torch.testing.assert_close(again, q)


def test_group_weight_adjustment_by_hand():
    """C / sqrt(n_g) with n = (4, 1, 0, 9), C = 2: (1, 2, 2, 2/3) (an empty group counts as 1);
    with zero losses q ~ exp(eta * adjustment)."""
    method, _ = _toy_method(GroupDRO, "groupdro", dro_adjustment=2.0)
    method.group_counts = torch.tensor([4.0, 1.0, 0.0, 9.0] + [1.0] * 12)
    adjustment = method.adjustment()
    torch.testing.assert_close(adjustment[:4], torch.tensor([1.0, 2.0, 2.0, 2.0 / 3.0]))
    q = updated_group_weights(torch.full((16,), 1 / 16), torch.zeros(16), 0.1, adjustment)
    expected = torch.exp(0.1 * adjustment)
    torch.testing.assert_close(q, expected / expected.sum())
    no_adjustment, _ = _toy_method(GroupDRO, "groupdro")
    assert no_adjustment.adjustment() is None  # C = 0, the official default


def test_groupdro_prepare_counts_training_groups():
    method, spec = _toy_method(GroupDRO, "groupdro")
    splits = _toy_splits()
    method.prepare(splits)
    train = splits.train
    expected = torch.bincount(train.labels * spec.num_biases + train.biases, minlength=16)
    assert method.group_counts.tolist() == expected.float().tolist()


def test_groupdro_update_is_robust_loss_with_the_updated_weights():
    """q is updated first (from this batch's group losses), then the loss sum_g q_g L_g with the
    new q makes one optimiser step; compared by hand with plain SGD at lr 1."""
    method, spec = _toy_method(
        GroupDRO, "groupdro", optimizer="sgd", lr=1.0, momentum=0.0, dro_step_size=0.3
    )
    batch = toy_batch(spec, n=12)
    before = copy.deepcopy(method.model)
    q0 = method.group_weights.clone()
    scalars = method.update(batch)

    losses = F.cross_entropy(before(batch.x), batch.y, reduction="none")
    groups = batch.y * spec.num_biases + batch.b
    group_loss = torch.stack(
        [losses[groups == g].mean() if (groups == g).any() else losses.sum() * 0 for g in range(16)]
    )
    q = q0 * torch.exp(0.3 * group_loss.detach())
    q = q / q.sum()
    torch.testing.assert_close(method.group_weights, q)
    expected = (q * group_loss).sum()
    torch.testing.assert_close(scalars["loss"], expected.detach())
    _sgd_step_matches(method.model, before, expected)


def test_groupdro_uses_the_bias_labels():
    assert group_index(torch.tensor([0, 1, 2]), torch.tensor([3, 0, 1]), 4).tolist() == [3, 4, 9]
    runs = []
    for flip in (False, True):
        method, spec = _toy_method(GroupDRO, "groupdro")
        for step in range(3):
            batch = toy_batch(spec, n=8, seed=step)
            if flip:
                batch = batch._replace(b=(batch.b + 1) % spec.num_biases)
            method.update(batch)
        runs.append(method.group_weights.clone())
    assert not torch.allclose(runs[0], runs[1])


# ----------------------------------------------------------------------------- SampleWeights
def test_sample_weights_normalise_to_mean_one_and_round_trip():
    weights = SampleWeights(4)
    with pytest.raises(RuntimeError, match="prepare"):
        weights[torch.tensor([0])]
    weights.set(torch.tensor([51.0, 1.0, 1.0, 51.0]))
    torch.testing.assert_close(weights.values, torch.tensor([51.0, 1.0, 1.0, 51.0]) * 4 / 104)
    other = SampleWeights(4)
    other.load_state_dict(weights.state_dict())
    assert other.ready and torch.equal(other[torch.arange(4)], weights.values)
    for bad in ([1.0, -1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0], [1.0, math.nan, 1.0, 1.0]):
        with pytest.raises(ValueError):
            SampleWeights(4).set(torch.tensor(bad))
    with pytest.raises(ValueError, match="shape"):
        SampleWeights(4).set(torch.ones(3))


# ----------------------------------------------------------------------------- JTT
def test_jtt_multiplicity_is_one_plus_upweight_on_the_error_set():
    errors = torch.tensor([True, False, False, True])
    assert upsampling_weights(errors, 50).tolist() == [51.0, 1.0, 1.0, 51.0]
    assert upsampling_weights(errors, 0).tolist() == [1.0] * 4  # lambda_up 0: plain ERM


def test_jtt_weighted_loss_equals_the_mean_over_the_upsampled_set():
    """On a full batch, the weighted mean of CE is exactly the mean CE over the training set
    with lambda_up extra copies of each error-set sample (the official upsampling); on a batch,
    sum(w l) / sum(w) over its rows."""
    g = torch.Generator().manual_seed(0)
    ce = torch.rand(10, generator=g)
    errors = torch.tensor([1, 0, 0, 1, 0, 0, 0, 1, 0, 0], dtype=torch.bool)
    weights = SampleWeights(10)
    weights.set(upsampling_weights(errors, 20))
    upsampled = torch.cat([ce, ce[errors].repeat(20)])
    torch.testing.assert_close(weights.weighted_mean(torch.arange(10), ce), upsampled.mean())
    rows = torch.tensor([0, 1, 2])  # one error-set sample (weight 21) and two others
    torch.testing.assert_close(
        weights.weighted_mean(rows, ce[rows]), (21 * ce[0] + ce[1] + ce[2]) / 23
    )


def test_stage_lengths():
    assert stage_steps(1, 211, 2110) == 211
    assert stage_steps(2.5, 16, 40) == 40  # capped by the run (smoke preset)
    assert stage_steps(0.01, 16) == 1  # at least one step
    method, _ = _toy_method(JTT, "jtt", env=_env(steps_per_epoch=16, total_steps=1000), id_epochs=2)
    assert method.identification_steps() == 32
    short, _ = _toy_method(JTT, "jtt", env=_env(steps_per_epoch=16, total_steps=20), id_epochs=2)
    assert short.identification_steps() == 20


class _Constant(Backbone):
    """Features 1: with a head that favours one class, every sample is predicted as it."""

    feat_dim = 1

    def forward(self, x):
        return torch.ones(len(x), 1)


def test_jtt_error_set_is_what_the_identification_model_misclassifies(monkeypatch):
    """The identification model is trained by CE for T epochs on its own stream; its
    misclassified training samples (eval mode) get weight 1 + lambda_up."""
    method, spec = _toy_method(JTT, "jtt", env=_env(steps_per_epoch=16, total_steps=100),
                               id_epochs=2, upweight=20)  # fmt: skip
    calls = {}

    def fake_train(model, optimizer, batches, steps, loss_fn, scheduler=None):
        calls.update(steps=steps, loss_fn=loss_fn, batch=next(batches))
        model.backbone = _Constant()
        model.head = nn.Linear(1, spec.num_classes)
        with torch.no_grad():
            model.head.weight.zero_()
            model.head.bias.copy_(torch.tensor([0.0, 0.0, 5.0, 0.0]))  # always class 2
        return model

    monkeypatch.setattr(jtt_module, "train_model", fake_train)
    splits = _toy_splits()
    method.prepare(splits)
    assert calls["steps"] == 32 and calls["loss_fn"] is F.cross_entropy
    assert len(calls["batch"].y) == resolve_hparams("jtt", "toy", protocol="clean")["batch_size"]
    errors = splits.train.labels != 2
    assert method.error_set.flags.tolist() == errors.tolist()
    multiplicity = torch.where(errors, 21.0, 1.0)
    # sampling: resample (the default): the duplicated set, N + 20 |E| rows an epoch
    assert method.batch_sampler() is method.upsampled and not method.weights.ready
    assert method.upsampled.values.tolist() == multiplicity.tolist()
    assert method.upsampled.epoch_size(splits.train) == 512 + 20 * int(errors.sum())


def test_jtt_loss_weights_variant_weighs_the_error_set(monkeypatch):
    method, _ = _toy_method(JTT, "jtt", id_epochs=2, upweight=20, **LOSS_WEIGHTS)
    monkeypatch.setattr(jtt_module, "train_model", lambda model, *args, **kwargs: model)
    splits = _toy_splits()
    method.prepare(splits)
    multiplicity = torch.where(method.error_set.flags, 21.0, 1.0)
    assert method.batch_sampler() is UNIFORM and not method.upsampled.ready
    torch.testing.assert_close(method.weights.values, multiplicity * 512 / multiplicity.sum())


def test_jtt_duplication_needs_a_whole_upweight():
    with pytest.raises(ConfigError, match="whole number"):
        _toy_method(JTT, "jtt", upweight=2.5)
    _toy_method(JTT, "jtt", upweight=2.5, **LOSS_WEIGHTS)  # a weighted loss takes any weight


def test_jtt_update_is_plain_ce_on_a_duplicated_batch():
    """Under duplication the batch already holds the copies: the loss is its mean CE."""
    method, spec = _toy_method(JTT, "jtt", optimizer="sgd", lr=1.0, momentum=0.0)
    method.error_set.set(torch.zeros(TRAIN_SIZE, dtype=torch.bool))
    batch = toy_batch(spec, n=8)
    before = copy.deepcopy(method.model)
    method.update(batch)
    _sgd_step_matches(method.model, before, F.cross_entropy(before(batch.x), batch.y))


def test_jtt_update_is_weighted_ce():
    method, spec = _toy_method(JTT, "jtt", optimizer="sgd", lr=1.0, momentum=0.0, **LOSS_WEIGHTS)
    errors = torch.zeros(TRAIN_SIZE, dtype=torch.bool)
    errors[[1, 4, 5]] = True
    method.error_set.set(errors)
    method.weights.set(upsampling_weights(errors, 50))
    batch = toy_batch(spec, n=8)
    before = copy.deepcopy(method.model)
    method.update(batch)
    w = method.weights.values[batch.index]
    assert w[1] == w[4] == w[5] == 51 * w[0]
    ce = F.cross_entropy(before(batch.x), batch.y, reduction="none")
    _sgd_step_matches(method.model, before, (ce * w).sum() / w.sum())


def test_jtt_refuses_to_train_before_its_error_set():
    method, spec = _toy_method(JTT, "jtt", **LOSS_WEIGHTS)
    with pytest.raises(RuntimeError, match="prepare"):
        method.update(toy_batch(spec, n=8))


# ----------------------------------------------------------------------------- PGD
def _per_sample_head_grads(model: Classifier, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d CE(f(x_i), y_i) / d head.weight for each sample, one backward pass per sample."""
    rows = []
    for i in range(len(y)):
        loss = F.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
        (grad,) = torch.autograd.grad(loss, model.head.weight)
        rows.append(grad.flatten())
    return torch.stack(rows)


@pytest.mark.parametrize("p", [0.3, 0.7, 1.0, 1.5, 2.0, 7.0])
def test_pgd_last_layer_norms_match_autograd_per_sample_gradients(p):
    """Any p > 0: the release's ``torch.norm(grad, p=norm_scale, dim=1)`` of the flattened
    per-sample gradient (p = 0.7 by default, not a norm) equals the factorised form."""
    torch.manual_seed(0)
    model = Classifier(_TinyBackbone(), 3)
    x, y = torch.randn(7, 5), torch.tensor([0, 1, 2, 0, 1, 2, 2])
    grads = _per_sample_head_grads(model, x, y).double()
    expected = torch.norm(grads, p=p, dim=1).float()
    h = model.features(x)
    got = last_layer_grad_norms(model.head(h), h, y, p)
    torch.testing.assert_close(got, expected.detach(), rtol=1e-5, atol=1e-7)
    if p == 0.7:  # the release's p and the paper's L2 rank the samples differently
        l2 = last_layer_grad_norms(model.head(h), h, y, 2.0)
        assert not torch.allclose(got / got.sum(), l2 / l2.sum(), rtol=0.05)


def test_pgd_norm_needs_a_positive_p():
    logits, h, y = torch.randn(2, 3), torch.randn(2, 4), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="p must be > 0"):
        last_layer_grad_norms(logits, h, y, 0.0)
    with pytest.raises(ConfigError, match="grad_norm"):
        make_config("pgd", "toy", 20, 0, overrides={"grad_norm": "l2"})


class _TinyBackbone(Backbone):
    feat_dim = 4

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(5, 4)

    def forward(self, x):
        return torch.relu(self.layer(x.flatten(1)[:, :5]))


def test_pgd_sampling_scores_power_and_floor():
    norms = torch.tensor([0.0, 0.5, 2.0])
    torch.testing.assert_close(sampling_scores(norms, 1.0), torch.tensor([1e-8, 0.5, 2.0]))
    torch.testing.assert_close(sampling_scores(norms, 2.0), torch.tensor([1e-8, 0.25, 4.0]))


def test_pgd_probabilities_follow_the_biased_models_gradient_norms(monkeypatch):
    """After prepare: the biased model trained with GCE (q) for the run's length, the debiased
    model starts from its weights, and the sample weights are N * ||g_i|| / sum_j ||g_j|| with g_i
    the per-sample gradient of CE w.r.t. the final layer's weight (autograd, eval mode)."""
    method, spec = _toy_method(PGD, "pgd", env=_env(total_steps=40))
    calls = {}

    def fake_train(model, optimizer, batches, steps, loss_fn, scheduler=None):
        calls.update(steps=steps, loss_fn=loss_fn)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1)  # "trained": different from the debiased model's own init
        return model

    monkeypatch.setattr(pgd_module, "train_model", fake_train)
    splits = _toy_splits()
    own_init = copy.deepcopy(method.model.state_dict())
    method.prepare(splits)
    assert calls["steps"] == 40
    logits, y = torch.randn(6, 4, requires_grad=True), torch.tensor([0, 1, 2, 3, 0, 1])
    torch.testing.assert_close(calls["loss_fn"](logits, y), generalized_ce(logits, y, 0.7).mean())
    assert any(not torch.equal(own_init[k], v) for k, v in method.model.state_dict().items())

    biased = method.model  # holds the biased model's weights (init_from_biased)
    biased.eval()
    x = to_float(splits.train.images, spec)
    grads = _per_sample_head_grads(biased, x, splits.train.labels).double()
    norms = torch.norm(grads, p=0.7, dim=1)  # the release's --norm_scale default
    probs = (norms / norms.sum()).float()
    assert method.batch_sampler() is method.resampling and not method.weights.ready
    got = method.resampling.probabilities().float()
    torch.testing.assert_close(got, probs, atol=1e-7, rtol=1e-4)


def test_pgd_can_start_the_debiased_model_fresh(monkeypatch):
    method, _ = _toy_method(PGD, "pgd", init_from_biased=False, bias_epochs=1.5)
    steps = []

    def fake_train(model, optimizer, batches, n, loss_fn, scheduler=None):
        steps.append(n)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1)
        return model

    monkeypatch.setattr(pgd_module, "train_model", fake_train)
    own_init = copy.deepcopy(method.model.state_dict())
    method.prepare(_toy_splits())
    assert steps == [24]  # 1.5 epochs of 16 steps
    assert_close_nested(
        {k: v.tolist() for k, v in method.model.state_dict().items()},
        {k: v.tolist() for k, v in own_init.items()},
    )


def test_pgd_update_is_plain_ce_on_a_resampled_batch():
    method, spec = _toy_method(PGD, "pgd", optimizer="sgd", lr=1.0, momentum=0.0)
    batch = toy_batch(spec, n=8)
    before = copy.deepcopy(method.model)
    method.update(batch)
    _sgd_step_matches(method.model, before, F.cross_entropy(before(batch.x), batch.y))


def test_pgd_update_is_ce_weighted_by_sampling_probability():
    """The loss_weights variant: the batch's CE averaged with the sampling probabilities of its
    rows as weights."""
    method, spec = _toy_method(PGD, "pgd", optimizer="sgd", lr=1.0, momentum=0.0, **LOSS_WEIGHTS)
    scores = torch.rand(TRAIN_SIZE, generator=torch.Generator().manual_seed(3))
    method.weights.set(scores)
    batch = toy_batch(spec, n=8)
    before = copy.deepcopy(method.model)
    method.update(batch)
    p = scores[batch.index] / scores.sum()  # the sampling probabilities of the batch's rows
    ce = F.cross_entropy(before(batch.x), batch.y, reduction="none")
    _sgd_step_matches(method.model, before, (ce * p).sum() / p.sum())


# ----------------------------------------------------------------------------- registry
@pytest.mark.parametrize(
    ("name", "display", "bias_labels"),
    [("groupdro", "GroupDRO", True), ("jtt", "JTT", False), ("pgd", "PGD", False)],
)
def test_registered_with_metadata(name, display, bias_labels):
    entry = METHODS.entry(name)
    assert entry.display_name == display and entry.meta["needs_bias_labels"] is bias_labels
    assert entry.citation and entry.meta["cost"]


@pytest.mark.parametrize(("cls", "name"), [(JTT, "jtt"), (PGD, "pgd")])
def test_training_ignores_bias_labels(cls, name):
    """Same seed, batches that differ only in their bias labels: identical models."""
    runs = []
    for flip in (False, True):
        method, spec = _toy_method(cls, name, **LOSS_WEIGHTS)
        if isinstance(method, JTT):
            method.error_set.set(torch.arange(TRAIN_SIZE) % 3 == 0)
        method.weights.set(torch.arange(TRAIN_SIZE).float() % 5 + 1)
        for step in range(4):
            batch = toy_batch(spec, n=8, seed=step)
            if flip:
                batch = batch._replace(b=(batch.b + 1) % spec.num_biases)
            method.update(batch)
        runs.append({k: v.tolist() for k, v in method.model.state_dict().items()})
    assert_close_nested(runs[0], runs[1])


@pytest.mark.parametrize(("cls", "name"), [(GroupDRO, "groupdro"), (JTT, "jtt"), (PGD, "pgd")])
def test_predicts_with_its_single_model(cls, name):
    method, spec = _toy_method(cls, name)
    x = toy_batch(spec, n=4).x
    with torch.no_grad():
        torch.testing.assert_close(method.predict(x), method.model(x))
        w, b = method.classifier_weight(), method.model.head.bias
        torch.testing.assert_close(method.predict(x), method.features(x) @ w.t() + b)


# ----------------------------------------------------------------------------- resume
TINY = {"steps": 24, "eval_every": 8, "batch_size": 32}
RESUME_CASES = {
    "groupdro": {"dro_adjustment": 1.0},
    "jtt": {"id_epochs": 0.5},
    "pgd": {"bias_epochs": 0.5},
}


#: where each method's prepared weights sit in its checkpoint, per sampling mode
PREPARED = {
    ("jtt", "resample"): "upsampled",
    ("pgd", "resample"): "resampling",
    ("jtt", "loss_weights"): "weights",
    ("pgd", "loss_weights"): "weights",
}


@pytest.mark.parametrize("sampling", ["resample", "loss_weights"])
@pytest.mark.parametrize("method", list(RESUME_CASES))
def test_interrupted_then_resumed_equals_uninterrupted(
    tmp_path, toy_place, method, sampling, monkeypatch
):
    """Stopped at step 13 (of 24; JTT's duplicated epochs make it longer) and resumed: the
    metrics of every evaluation and the selections equal the uninterrupted run's, for both
    sampling modes: the sampler's weights come back from the checkpoint, its draws from
    (seed, epoch)."""
    overrides = {**TINY, **RESUME_CASES[method], "sampling": sampling}
    if method == "jtt":
        overrides.update(steps=None, epochs=2, eval_every=None, eval_every_epochs=0.5, upweight=5)
    config = make_config(method, "toy", 20, 0, protocol="clean", overrides=overrides)
    whole, whole_dir, stopped = whole_and_stopped(config, tmp_path, toy_place, stop_at=13)
    checkpoint = stopped.load_checkpoint()["method"]
    if method == "groupdro":  # the group weights have moved away from uniform
        assert checkpoint["group_weights"].std() > 0
    else:  # the weights of the preparation stage are in the checkpoint
        state = checkpoint[PREPARED[method, sampling]]
        assert state["ready"] and state["values"].std() > 0
    if (method, sampling) == ("jtt", "resample"):  # epochs of the duplicated set: N + 5 |E|
        extra = int(state["values"].sum()) - TRAIN_SIZE
        assert extra > 0 and extra % 5 == 0
        assert whole["steps"] == 2 * math.ceil((TRAIN_SIZE + extra) / 32) > 2 * TRAIN_SIZE // 32

    def no_prepare(self, data):
        raise AssertionError("prepare() ran again on resume")

    monkeypatch.setattr(METHODS.get(method), "prepare", no_prepare)
    assert_resumes_to_whole(config, toy_place, stopped, whole, whole_dir)


class _Killed(Exception):
    """Stands for ``kill -9``: the run ends without writing a checkpoint of its own."""


@pytest.mark.parametrize("method", list(RESUME_CASES))
def test_killed_then_resumed_equals_uninterrupted(tmp_path, toy_place, method):
    """Killed 3 steps after its first evaluation, with the official sampler: the rerun resumes
    from that evaluation's checkpoint (the sampler's weights in it) and ends where the
    uninterrupted run did."""
    overrides = {**TINY, **RESUME_CASES[method]}
    config = make_config(method, "toy", 20, 0, protocol="clean", overrides=overrides)
    whole_dir = RunStore(tmp_path / "whole").run(config.run_id)
    whole = train_run(config, whole_dir, toy_place, CPU)
    killed = RunStore(tmp_path / "killed").run(config.run_id)

    def kill(step: int) -> bool:
        evaluated = killed.metrics()
        if evaluated and step == evaluated[0]["step"] + 3:
            raise _Killed
        return False

    with pytest.raises(_Killed):
        train_run(config, killed, toy_place, CPU, should_stop=kill)
    assert killed.load_checkpoint()["step"] == 8  # the first evaluation's (eval_every 8)
    assert_resumes_to_whole(config, toy_place, killed, whole, whole_dir)


# ----------------------------------------------------------------------------- YAML defaults
# (method, dataset, {key: value}) transcribed from the official repositories (module docstrings)
EXPECTED = [
    # kohpangwei/group_DRO: --robust_step_size 0.01, --generalization_adjustment 0 (README)
    ("groupdro", "cmnist", {"dro_step_size": 0.01, "dro_adjustment": 0.0, "lr": 1e-3,
                            "batch_size": 256, "epochs": 100}),
    # anniesch/jtt: lambda_up from the official grid {20, 50, 100} (chosen on validation)
    ("jtt", "cmnist", {"upweight": 100, "id_epochs": 2, "lr": 1e-3, "batch_size": 256,
                       "epochs": 100}),
    # sumyeongahn/PGD learner.py / train.py defaults; the optimiser recipe is the common one
    # (chosen on validation over the release's SGD recipe: pgd.yaml)
    ("pgd", "cmnist", {"optimizer": "adam", "lr": 1e-3, "batch_size": 256, "epochs": 100,
                       "q": 0.7, "bias_epochs": None, "grad_norm": 0.7, "grad_power": 1.0,
                       "init_from_biased": True}),
]  # fmt: skip


@pytest.mark.parametrize(("method", "dataset", "expected"), EXPECTED)
def test_yaml_defaults_match_the_official_recipes(method, dataset, expected):
    layered = resolve_hparams(method, dataset, protocol="official")
    for key, value in expected.items():
        assert layered[key] == value, (method, dataset, key)
    assert method_yaml(method)["defaults"]  # the YAML is found beside the module
    # each draws its batches as its official code does, and has none of the LfF-line quirks
    assert layered["sampling"] == "resample" and layered["input_div255"] is False


@pytest.mark.parametrize(
    ("method", "kind"),
    [("groupdro", GroupBalanced), ("jtt", Weighted), ("pgd", Weighted)],
)
def test_the_official_sampler_by_default_and_uniform_batches_as_the_variant(method, kind):
    cls = METHODS.get(method)
    official, _ = _toy_method(cls, method)
    variant, _ = _toy_method(cls, method, **LOSS_WEIGHTS)
    assert isinstance(official.batch_sampler(), kind)
    assert variant.batch_sampler() is UNIFORM
    if kind is Weighted:  # JTT duplicates (no replacement), PGD draws with replacement
        assert official.batch_sampler().replacement is (method == "pgd")


def test_bench_config_shows_pgds_inputs_scaled_once(capsys):
    """Under the official protocol PGD keeps the release's [0, 1] inputs, which its YAML
    declares (so it does not take Vanilla's terms, issue 48); LfF, whose official MLP divides by
    255 again, declares that quirk in its own YAML."""
    assert main(["config", "pgd", "cmnist", "--protocol", "official"]) == 0
    table = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()
             if line and not line.startswith("#")}  # fmt: skip
    assert table["input_div255"] == ["false", "pgd.yaml", "protocols.official"]
    assert table["sampling"] == ["resample", "pgd", "declaration"]
    assert table["grad_norm"] == ["0.7", "pgd.yaml", "defaults"]
    assert main(["config", "lff", "cmnist", "--protocol", "official"]) == 0
    lff = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()
           if line and not line.startswith("#")}  # fmt: skip
    assert lff["input_div255"] == ["true", "lff.yaml", "protocols.official"]


def test_jtt_upweight_and_id_epochs_stay_on_the_official_grids():
    values = resolve_hparams("jtt", "cmnist", protocol="official")
    assert values["upweight"] in (20, 50, 100)
    assert values["id_epochs"] >= 1


def test_pgd_scores_a_split_in_eval_mode_without_augmentation():
    """Dropout would change the scores between calls in train mode; eval mode fixes them."""

    class Dropping(Backbone):
        feat_dim = 8

        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Sequential(nn.Flatten(), nn.Linear(192, 8), nn.Dropout(0.5))

        def forward(self, x):
            return self.layer(x)

    spec = DATASETS.get("toy").spec
    torch.manual_seed(0)
    model = Classifier(Dropping(), spec.num_classes)
    split = Split(
        images=(torch.rand(10, 8, 8, 3) * 255).to(torch.uint8),
        labels=torch.arange(10) % 4,
        biases=torch.arange(10) % 4,
    )
    model.train()
    first = pgd_module.gradient_norms(model, split, spec, 4, CPU)
    model.train()
    second = pgd_module.gradient_norms(model, split, spec, 4, CPU)
    assert not model.training and torch.equal(first, second) and first.shape == (10,)
