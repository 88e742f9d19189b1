"""LfF, LfF+BE and DisEnt: the core math on hand-made tensors, resume, and YAML defaults."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from support.asserts import assert_close_nested
from support.methods_helpers import CPU, assert_resumes_to_whole, toy_batch, whole_and_stopped
from torch import nn

from debias_bench.config.run_config import make_config, method_yaml, resolve_hparams
from debias_bench.data.contract import Batch
from debias_bench.methods.biased import CommitteeConfig, agreement_mask, train_member
from debias_bench.methods.disent import Branch, DisEnt, disentangled_logits
from debias_bench.methods.ema import SampleLossEMA, relative_difficulty
from debias_bench.methods.lff import LfF
from debias_bench.methods.lff_be import LfFBE
from debias_bench.methods.losses import generalized_ce
from debias_bench.registry import DATASETS, METHODS
from debias_bench.training.method import TrainEnv


# ----------------------------------------------------------------------------- GCE
def test_gce_value_and_gradient_by_hand():
    """logits (0, ln 3): p = (1/4, 3/4). For y = 1: CE = -ln(3/4), GCE = CE * q * p_y^q, and the
    gradient is q p_y^q (softmax - onehot) = q (3/4)^q (1/4, -1/4)."""
    q = 0.7
    logits = torch.tensor([[0.0, math.log(3.0)]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([1])
    loss = generalized_ce(logits, y, q)
    scale = q * 0.75**q
    assert loss.item() == pytest.approx(-math.log(0.75) * scale, rel=1e-12)
    (grad,) = torch.autograd.grad(loss.sum(), logits)
    torch.testing.assert_close(
        grad, torch.tensor([[0.25 * scale, -0.25 * scale]], dtype=grad.dtype)
    )


def test_gce_weights_easy_samples_more_than_ce():
    logits = torch.tensor([[4.0, 0.0], [0.0, 0.0]], requires_grad=True)  # easy, then hard
    y = torch.tensor([0, 0])
    (g_gce,) = torch.autograd.grad(generalized_ce(logits, y).sum(), logits)
    (g_ce,) = torch.autograd.grad(F.cross_entropy(logits, y, reduction="sum"), logits)
    ratio = g_gce.norm(dim=1) / g_ce.norm(dim=1)
    assert ratio[0] > ratio[1]  # GCE up-weights the sample the model already fits


# ----------------------------------------------------------------------------- EMA
def test_ema_first_visit_then_moving_average_and_class_max():
    ema = SampleLossEMA(4, alpha=0.7)
    ema.update(torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), torch.tensor([0, 1]))
    torch.testing.assert_close(ema.values, torch.tensor([1.0, 2.0, 0.0, 0.0]))  # raw first loss
    ema.update(torch.tensor([0, 2]), torch.tensor([3.0, 4.0]), torch.tensor([0, 0]))
    # sample 0: 0.7 * 1 + 0.3 * 3 = 1.6; sample 2 is new: 4.0
    torch.testing.assert_close(ema.values, torch.tensor([1.6, 2.0, 4.0, 0.0]))
    torch.testing.assert_close(ema.class_max(2), torch.tensor([4.0, 2.0]))
    # class 0 max 4.0, class 1 max 2.0
    torch.testing.assert_close(
        ema.normalized(torch.tensor([0, 1, 2]), 2), torch.tensor([0.4, 1.0, 1.0])
    )


def test_ema_labels_up_front_or_on_visit_agree():
    labels = torch.tensor([0, 1, 0, 1, 1])
    known, learned = SampleLossEMA(labels, 0.7), SampleLossEMA(5, 0.7)
    g = torch.Generator().manual_seed(0)
    for _ in range(4):
        idx = torch.randperm(5, generator=g)[:3]
        loss = torch.rand(3, generator=g)
        known.update(idx, loss)
        learned.update(idx, loss, labels[idx])
        torch.testing.assert_close(known.normalized(idx, 2), learned.normalized(idx, 2))


def test_ema_sized_without_labels_requires_them_on_update():
    ema = SampleLossEMA(3, 0.7)
    with pytest.raises(ValueError, match="labels"):
        ema.update(torch.tensor([0]), torch.tensor([1.0]))


def test_ema_state_round_trip_includes_labels():
    ema = SampleLossEMA(3, 0.7)
    ema.update(torch.tensor([2]), torch.tensor([5.0]), torch.tensor([1]))
    other = SampleLossEMA(3, 0.7)
    other.load_state_dict(ema.state_dict())
    assert other.labels.tolist() == [0, 0, 1] and other.visited.tolist() == [False, False, True]


def test_relative_difficulty_by_hand():
    labels = torch.tensor([0, 0, 1])
    ema_b, ema_d = SampleLossEMA(labels, 0.7), SampleLossEMA(labels, 0.7)
    idx = torch.arange(3)
    ema_b.update(idx, torch.tensor([2.0, 1.0, 3.0]))
    ema_d.update(idx, torch.tensor([1.0, 4.0, 3.0]))
    # normalised l_b = (1, 1/2, 1), l_d = (1/4, 1, 1); w = l_b / (l_b + l_d)
    expected = torch.tensor([1 / 1.25, 0.5 / 1.5, 0.5])
    torch.testing.assert_close(relative_difficulty(ema_b, ema_d, idx, 2), expected)


# ----------------------------------------------------------------------------- LfF
def _env(n=64, seed=0):
    return TrainEnv(CPU, n, 4, 40, seed)


def _toy_method(cls, method, **overrides):
    spec = DATASETS.get("toy").spec
    hp = {**resolve_hparams(method, "toy", protocol="clean"), **overrides}
    torch.manual_seed(0)
    return cls(spec, hp, _env()), spec


def test_lff_update_is_one_backward_of_gce_plus_weighted_ce():
    """Plain SGD (lr 1) turns the parameter change into minus the gradient: compare with the
    gradients of mean(GCE(f_b)) and mean(w * CE(f_d)) computed here by hand."""
    method, spec = _toy_method(LfF, "lff", optimizer="sgd", lr=1.0, momentum=0.0)
    batch = toy_batch(spec, n=8)
    model_b, model_d = copy.deepcopy(method.model_b), copy.deepcopy(method.model_d)
    method.update(batch)

    logits_b, logits_d = model_b(batch.x), model_d(batch.x)
    ce_b = F.cross_entropy(logits_b, batch.y, reduction="none").detach()
    ce_d = F.cross_entropy(logits_d, batch.y, reduction="none")
    # first visit: the EMA is the raw loss; normalise by the class maximum within the batch
    # (the only visited samples), then w = l_b / (l_b + l_d)
    max_b = torch.stack([ce_b[batch.y == c].max() for c in batch.y.tolist()])
    max_d = torch.stack([ce_d.detach()[batch.y == c].max() for c in batch.y.tolist()])
    l_b, l_d = ce_b / max_b, ce_d.detach() / max_d
    w = l_b / (l_b + l_d)
    expected_b = torch.autograd.grad(
        generalized_ce(logits_b, batch.y, 0.7).mean(), [*model_b.parameters()]
    )
    expected_d = torch.autograd.grad((ce_d * w).mean(), [*model_d.parameters()])
    for old, new, g in zip(
        model_b.parameters(), method.model_b.parameters(), expected_b, strict=True
    ):
        torch.testing.assert_close(old - new, g, atol=1e-6, rtol=1e-5)
    for old, new, g in zip(
        model_d.parameters(), method.model_d.parameters(), expected_d, strict=True
    ):
        torch.testing.assert_close(old - new, g, atol=1e-6, rtol=1e-5)


def test_lff_predicts_with_the_debiased_model():
    method, spec = _toy_method(LfF, "lff")
    x = toy_batch(spec, n=4).x
    with torch.no_grad():
        torch.testing.assert_close(method.predict(x), method.model_d(x))
        torch.testing.assert_close(method.features(x), method.model_d.features(x))
        w, b = method.classifier_weight(), method.model_d.head.bias
        torch.testing.assert_close(method.predict(x), method.features(x) @ w.t() + b)


# ----------------------------------------------------------------------------- BiasEnsemble
def test_committee_agreement_rule():
    """Pseudo-aligned iff softmax(true class) > 0.99 (strictly) for at least 3 of 5 members."""
    probs = torch.tensor(
        [
            # s0: 3 above  s1: all at 0.99  s2: 2 above  s3: 4 above  s4: 5 above
            [0.995, 0.99, 1.0, 0.999, 0.9999],
            [0.995, 0.99, 1.0, 0.999, 0.9999],
            [0.995, 0.99, 0.0, 0.999, 0.9999],
            [0.5, 0.99, 0.0, 0.999, 0.9999],
            [0.5, 0.99, 0.0, 0.1, 0.9999],
        ]
    )
    assert agreement_mask(probs, 0.99, 3).tolist() == [True, False, False, True, True]
    assert agreement_mask(probs, 0.99, 5).tolist() == [False, False, False, False, True]


@pytest.mark.parametrize(("scripted", "pick"), [((0.6, 0.5), 0), ((0.5, 0.6), 1), ((0.5, 0.5), 0)])
def test_committee_member_checkpoint_compares_steps_0_and_500_only(scripted, pick):
    """valid_every 500 over 1,000 steps: evaluated after update 1 and update 501; the strictly
    better one is kept (a tie keeps the first), never the final model."""
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    updates = [0]

    def batches():
        while True:
            updates[0] += 1
            yield Batch(
                torch.arange(4),
                torch.randn(4, 3, generator=g),
                torch.tensor([0, 1, 0, 1]),
                torch.zeros(4, dtype=torch.long),
            )

    calls, snapshots = [], []

    def valid_accuracy(m):
        calls.append(updates[0])
        snapshots.append(copy.deepcopy(m.state_dict()))
        return scripted[len(calls) - 1]

    cfg = CommitteeConfig(steps=1000, valid_every=500)
    best = train_member(model, optimizer, batches(), cfg, valid_accuracy)
    assert calls == [1, 501]
    assert_close_nested(
        {k: v.tolist() for k, v in best.state_dict().items()},
        {k: v.tolist() for k, v in snapshots[pick].items()},
    )
    assert best is not model  # a copy, not the model that trained on


def test_lff_be_biased_model_uses_plain_ce_on_pseudo_aligned_samples_only():
    method, spec = _toy_method(LfFBE, "lff_be")
    batch = toy_batch(spec, n=8)
    mask = torch.zeros(64, dtype=torch.bool)
    mask[[1, 4, 5]] = True
    method.pseudo_aligned.set(mask)
    logits = torch.randn(8, spec.num_classes, requires_grad=True)
    loss = method.bias_loss(logits, batch)
    sel = torch.tensor([1, 4, 5])
    torch.testing.assert_close(loss, F.cross_entropy(logits[sel], batch.y[sel]))
    (grad,) = torch.autograd.grad(loss, logits)
    others = torch.tensor([0, 2, 3, 6, 7])
    assert grad[others].abs().max() == 0 and grad[sel].abs().max() > 0
    # no pseudo-aligned sample in the batch: a zero loss, not NaN
    method.pseudo_aligned.set(torch.zeros(64, dtype=torch.bool))
    empty = method.bias_loss(logits, batch)
    assert empty.item() == 0.0 and empty.requires_grad


def test_lff_be_refuses_to_train_before_its_committee():
    method, spec = _toy_method(LfFBE, "lff_be")
    with pytest.raises(RuntimeError, match="prepare"):
        method.update(toy_batch(spec, n=8))


# ----------------------------------------------------------------------------- DisEnt
def _branches(dim_in=6, feat=3, k=4):
    torch.manual_seed(0)

    class Enc(nn.Linear):
        feat_dim = feat

    return Branch(Enc(dim_in, feat), k), Branch(Enc(dim_in, feat), k)


def _grad_norms(loss, *modules):
    params = [p for m in modules for p in m.parameters()]
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    out, i = [], 0
    for m in modules:
        n = len(list(m.parameters()))
        out.append(sum(0.0 if g is None else float(g.abs().sum()) for g in grads[i : i + n]))
        i += n
    return out


def test_disent_stop_gradients():
    """C_i reads [z_i, sg z_b] and C_b reads [sg z_i, z_b]: the intrinsic loss never reaches
    the bias encoder and the bias loss never reaches the intrinsic encoder."""
    intrinsic, bias = _branches()
    x, y = torch.randn(5, 6), torch.tensor([0, 1, 2, 3, 0])
    z_i, z_b = intrinsic(x), bias(x)
    logits_i, logits_b = disentangled_logits(intrinsic, bias, z_i, z_b)
    ce_i = F.cross_entropy(logits_i, y)
    gce_b = generalized_ce(logits_b, y).mean()
    g_enc_i, g_enc_b, g_head_i, g_head_b = _grad_norms(
        ce_i, intrinsic.encoder, bias.encoder, intrinsic.head, bias.head
    )
    assert g_enc_i > 0 and g_head_i > 0 and g_enc_b == 0 and g_head_b == 0
    g_enc_i, g_enc_b, g_head_i, g_head_b = _grad_norms(
        gce_b, intrinsic.encoder, bias.encoder, intrinsic.head, bias.head
    )
    assert g_enc_b > 0 and g_head_b > 0 and g_enc_i == 0 and g_head_i == 0
    # each head reads the concatenation [z_i, z_b]
    torch.testing.assert_close(logits_i, intrinsic.head(torch.cat([z_i, z_b], 1)))
    torch.testing.assert_close(logits_b, bias.head(torch.cat([z_i, z_b], 1)))


def test_disent_swap_permutes_bias_features_and_their_labels():
    method, spec = _toy_method(DisEnt, "disent", lambda_swap_align=3.0)
    batch = toy_batch(spec, n=6)
    z_i, z_b = method.intrinsic(batch.x), method.bias(batch.x)
    w = torch.rand(6)
    torch.manual_seed(123)
    perm = torch.randperm(6)
    torch.manual_seed(123)
    loss = method.swap_loss(z_i, z_b, w, batch.y)
    head_i, head_b = method.intrinsic.head, method.bias.head
    swapped = torch.cat([z_i, z_b[perm]], 1)
    expected = (F.cross_entropy(head_i(swapped), batch.y, reduction="none") * w).mean()
    expected = expected + 3.0 * generalized_ce(head_b(swapped), batch.y[perm]).mean()
    torch.testing.assert_close(loss, expected)
    # stop-gradients hold for the swapped pairs too: split the two terms
    torch.manual_seed(123)
    logits_i, logits_b = disentangled_logits(method.intrinsic, method.bias, z_i, z_b[perm])
    ce_i = (F.cross_entropy(logits_i, batch.y, reduction="none") * w).mean()
    gce_b = generalized_ce(logits_b, batch.y[perm]).mean()
    assert _grad_norms(ce_i, method.bias.encoder)[0] == 0
    assert _grad_norms(gce_b, method.intrinsic.encoder)[0] == 0


def test_disent_swap_after_curr_step_and_lr_decay_from_it():
    """curr_step 3 (0-based): swap from step 4 on; StepLR(2, 0.5) stepped after every update
    from step 3 on, so the lr halves before step 5 and again before step 7."""
    method, spec = _toy_method(
        DisEnt, "disent", curr_step=3, use_lr_decay=True, lr_decay_step=2, lr_gamma=0.5, lr=1e-3
    )
    lrs, swaps = [], []
    for step in range(8):
        lrs.append(method.optimizer_i.param_groups[0]["lr"] / 1e-3)
        assert method.optimizer_b.param_groups[0]["lr"] == method.optimizer_i.param_groups[0]["lr"]
        swaps.append(float(method.update(toy_batch(spec, n=8, seed=step))["loss_swap"]) > 0)
    assert lrs == pytest.approx([1, 1, 1, 1, 1, 0.5, 0.5, 0.25])
    assert swaps == [False] * 4 + [True] * 4
    state = method.state_dict()
    assert state["steps_done"] == {"value": 8} and "scheduler_i" in state


def test_disent_predicts_with_the_intrinsic_classifier_over_both_features():
    method, spec = _toy_method(DisEnt, "disent")
    x = toy_batch(spec, n=4).x
    with torch.no_grad():
        z = torch.cat([method.intrinsic(x), method.bias(x)], 1)
        torch.testing.assert_close(method.predict(x), method.intrinsic.head(z))
        torch.testing.assert_close(method.features(x), z)
        w, b = method.classifier_weight(), method.intrinsic.head.bias
        torch.testing.assert_close(method.predict(x), z @ w.t() + b)


# ----------------------------------------------------------------------------- registry
@pytest.mark.parametrize(
    ("name", "display"), [("lff", "LfF"), ("lff_be", "LfF+BE"), ("disent", "DisEnt")]
)
def test_registered_without_bias_labels(name, display):
    entry = METHODS.entry(name)
    assert entry.display_name == display and entry.meta["needs_bias_labels"] is False
    assert entry.citation and entry.meta["cost"]


# ----------------------------------------------------------------------------- resume
TINY = {"steps": 24, "eval_every": 8, "batch_size": 32}
RESUME_CASES = {
    "lff": {},
    "lff_be": {"committee_steps": 12, "committee_valid_every": 5},
    "disent": {"curr_step": 5, "use_lr_decay": True, "lr_decay_step": 4, "lr_gamma": 0.5},
}


@pytest.mark.parametrize("method", list(RESUME_CASES))
def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, toy_place, method, monkeypatch):
    overrides = {**TINY, **RESUME_CASES[method]}
    config = make_config(method, "toy", 20, 0, protocol="clean", overrides=overrides)
    whole, whole_dir, stopped = whole_and_stopped(config, tmp_path, toy_place, stop_at=13)
    if method == "lff_be":  # the committee's mask comes from the checkpoint, not a new committee

        def no_committee(self, data):
            raise AssertionError("prepare() ran again on resume")

        monkeypatch.setattr(LfFBE, "prepare", no_committee)
    assert_resumes_to_whole(config, toy_place, stopped, whole, whole_dir)


# ----------------------------------------------------------------------------- YAML defaults
# (method, dataset, {key: value}) transcribed from ../shared/reference/METHODS.md.
EXPECTED = [
    # section 3.2, LfF config.py
    ("lff", "cmnist", {"optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "batch_size": 256,
                       "epochs": 100, "mlp_hidden": [100, 100, 100], "q": 0.7, "ema_alpha": 0.7}),
    ("lff", "cifar10c", {"backbone": "resnet20_kaiming", "lr": 1e-3, "batch_size": 256,
                         "epochs": 200}),
    # section 4.3, BiasEnsemble train.py defaults and scripts/train_codes/*.sh
    ("lff_be", "cmnist", {"lr": 1e-2, "batch_size": 256, "steps": 50000, "weight_decay": 0.0,
                          "mlp_hidden": [100, 100, 16], "committee_members": 5,
                          "committee_steps": 1000, "committee_valid_every": 500,
                          "committee_threshold": 0.99, "committee_agreement": 3, "q": 0.7,
                          "ema_alpha": 0.7}),
    ("lff_be", "bffhq", {"lr": 1e-4, "batch_size": 64, "backbone": "resnet18", "steps": 50000}),
    ("lff_be", "dogs_and_cats", {"lr": 1e-4, "batch_size": 64, "backbone": "resnet18"}),
    ("lff_be", "bar", {"lr": 1e-5, "batch_size": 64, "backbone": "resnet18_pretrained"}),
    # section 5.3, DisEnt train.py defaults and scripts/run_*_ours.sh
    ("disent", "cmnist", {"lr": 1e-2, "batch_size": 256, "steps": 50000, "curr_step": 10000,
                          "lambda_swap": 1.0, "lambda_dis_align": 10.0,
                          "lambda_swap_align": 10.0, "use_lr_decay": True,
                          "lr_decay_step": 10000, "lr_gamma": 0.5,
                          "mlp_hidden": [100, 100, 16], "q": 0.7, "ema_alpha": 0.7}),
    ("disent", "cifar10c", {"backbone": "resnet18", "lr": 1e-3, "batch_size": 256,
                            "curr_step": 10000, "lambda_swap": 1.0, "lambda_dis_align": 5.0,
                            "lambda_swap_align": 5.0, "lr_decay_step": 10000, "lr_gamma": 0.5}),
    ("disent", "bffhq", {"backbone": "resnet18", "lr": 1e-4, "batch_size": 64, "curr_step": 10000,
                         "lambda_swap": 0.1, "lambda_dis_align": 2.0, "lambda_swap_align": 2.0,
                         "use_lr_decay": True, "lr_decay_step": 10000, "lr_gamma": 0.1}),
    # section 4.3, BiasEnsemble's DisEnt+BE commands (no plain-DisEnt release for these sets)
    ("disent", "dogs_and_cats", {"lr": 1e-4, "batch_size": 64, "lambda_swap": 1.0,
                                 "lambda_dis_align": 1.0, "lambda_swap_align": 1.0,
                                 "lr_gamma": 0.1, "curr_step": 10000}),
    ("disent", "bar", {"lr": 1e-5, "batch_size": 64, "backbone": "resnet18_pretrained",
                       "lambda_swap": 1.0, "lambda_dis_align": 1.0, "lambda_swap_align": 1.0,
                       "lr_gamma": 0.1}),
]  # fmt: skip


@pytest.mark.parametrize(("method", "dataset", "expected"), EXPECTED)
def test_yaml_defaults_match_the_official_recipes(method, dataset, expected):
    doc = method_yaml(method)
    layered = {**doc["defaults"], **doc["datasets"][dataset]}
    if dataset in DATASETS:  # the engine's resolution agrees where the dataset exists
        layered = resolve_hparams(method, dataset, protocol="official")
    for key, value in expected.items():
        assert layered[key] == value, (method, dataset, key)


def test_lff_be_committee_never_trains_longer_than_the_run():
    spec = DATASETS.get("toy").spec
    hp = resolve_hparams("lff_be", "toy", protocol="clean")
    short = LfFBE(spec, hp, TrainEnv(CPU, 64, 4, 20, 0))
    assert short.committee_config().steps == 20
    long = LfFBE(spec, hp, TrainEnv(CPU, 64, 4, 50_000, 0))
    assert long.committee_config().steps == 1000 and long.committee_config().valid_every == 500


@pytest.mark.parametrize(("cls", "name"), [(LfF, "lff"), (LfFBE, "lff_be"), (DisEnt, "disent")])
def test_training_ignores_bias_labels(cls, name):
    """Same seed, batches that differ only in their bias labels: identical models."""
    runs = []
    for flip in (False, True):
        method, spec = _toy_method(cls, name, curr_step=1)
        if isinstance(method, LfFBE):
            method.pseudo_aligned.set(torch.arange(64) % 2 == 0)
        torch.manual_seed(1)
        for step in range(4):
            batch = toy_batch(spec, n=8, seed=step)
            if flip:
                batch = batch._replace(b=(batch.b + 1) % spec.num_biases)
            method.update(batch)
        runs.append(
            {
                f"{i}.{k}": v.tolist()
                for i, m in enumerate(method.modules())
                for k, v in m.state_dict().items()
            }
        )
    assert_close_nested(runs[0], runs[1])
