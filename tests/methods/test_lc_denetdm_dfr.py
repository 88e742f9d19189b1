"""LC, DeNetDM and DFR: each method's math against an independent computation on hand-made
tensors, DFR's reuse of a stored Vanilla run, the YAMLs, and a short real-data check."""

from __future__ import annotations

import copy
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import StandardScaler
from support.methods_helpers import CPU, toy_batch

from debias_bench.config.run_config import make_config, resolve_hparams
from debias_bench.methods.denetdm import DeNetDM, Experts, distillation_loss
from debias_bench.methods.dfr import DFR, balanced_rows, erm_config, valid_halves
from debias_bench.methods.ema import SampleLossEMA
from debias_bench.methods.lc import (
    LC,
    GroupPrior,
    corrected_ce,
    mixup_partners,
    sigmoid_rampup,
)
from debias_bench.methods.losses import generalized_ce
from debias_bench.paths import DataPlace
from debias_bench.registry import DATASETS
from debias_bench.reporting.paper import load_paper
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run
from debias_bench.training.method import TrainEnv

TRAIN_SIZE = 512  # the toy dataset's training split


def _toy(cls, method, total_steps=40, **overrides):
    spec = DATASETS.get("toy").spec
    hp = {**resolve_hparams(method, "toy", protocol="clean"), **overrides}
    torch.manual_seed(0)
    return cls(spec, hp, TrainEnv(CPU, TRAIN_SIZE, 16, total_steps, 0)), spec


def _sgd_deltas(before, after):
    return [b - a for b, a in zip(before.parameters(), after.parameters(), strict=True)]


# ----------------------------------------------------------------------------- LC
def test_ema_in_order_equals_one_update_per_element():
    """Repeated indices (LC's prior cells): the vectorised update against a Python loop of
    single updates, first visits included."""
    g = torch.Generator().manual_seed(0)
    looped = SampleLossEMA(torch.zeros(6, dtype=torch.long), 0.9)
    at_once = SampleLossEMA(torch.zeros(6, dtype=torch.long), 0.9)
    for _ in range(5):
        idx, val = torch.randint(0, 6, (12,), generator=g), torch.rand(12, generator=g)
        for i, v in zip(idx.tolist(), val.tolist(), strict=True):
            old = looped.values[i].item()
            looped.values[i] = 0.9 * old + 0.1 * v if looped.visited[i] else v
            looped.visited[i] = True
        at_once.update_in_order(idx, val)
        torch.testing.assert_close(at_once.values, looped.values)
        assert torch.equal(at_once.visited, looped.visited)


def test_group_prior_cells_by_hand():
    """Two classes; samples (y, pseudo, p_y): (0,0,.8) (0,0,.6) (1,0,.3) (1,1,.9), alpha 0.5.
    Cell (0,0): first visit .8, then .5*.8 + .5*.6 = .7; (1,0) = .3; (1,1) = .9; (0,1) = 0."""
    prior = GroupPrior(2, 0.5, "mv", CPU)
    y, pseudo = torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 0, 1])
    prior.update(y, pseudo, torch.tensor([0.8, 0.6, 0.3, 0.9]))
    torch.testing.assert_close(prior.matrix(False), torch.tensor([[0.7, 0.0], [0.3, 0.9]]))
    torch.testing.assert_close(
        prior.matrix(True), torch.tensor([[0.7, 0.0], [0.3, 0.9]]) / torch.tensor([1.0, 0.9])
    )
    batch = GroupPrior(2, 0.5, "batch", CPU)
    batch.update(y, pseudo, torch.tensor([0.8, 0.6, 0.3, 0.9]))
    torch.testing.assert_close(
        batch.matrix(False), torch.tensor([[1.4 / 2.0001, 0.0], [0.3 / 1.0001, 0.9 / 1.0001]])
    )


def test_corrected_ce_by_hand():
    """Zero logits and prior (1/2, 1/4): the corrected softmax is prior-proportional
    (+1e-4), so CE for y = 1 is -log((1/4 + 1e-4) / (3/4 + 2e-4))."""
    logits = torch.zeros(1, 2, dtype=torch.float64)
    prior = torch.tensor([[0.5, 0.25]], dtype=torch.float64)
    loss = corrected_ce(logits, torch.tensor([1]), prior)
    assert loss.item() == pytest.approx(-math.log((0.25 + 1e-4) / (0.75 + 2e-4)), rel=1e-12)


def test_sigmoid_rampup():
    assert sigmoid_rampup(0, 0) == 1.0 and sigmoid_rampup(5, 10) == pytest.approx(
        math.exp(-5 * 0.25)
    )
    assert sigmoid_rampup(0, 10) == pytest.approx(math.exp(-5)) and sigmoid_rampup(20, 10) == 1.0


def test_mixup_partners_stay_in_class_and_prefer_minority():
    y = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    minority = torch.tensor([False, True, False, False, False, True, True, False])
    draws = torch.Generator().manual_seed(0)
    for _ in range(20):
        partner = mixup_partners(y, minority, 3, draws)
        assert torch.equal(y[partner], y)
        assert set(partner[y == 0].tolist()) == {1} and set(partner[y == 2].tolist()) <= {5, 6}
        assert sorted(partner[y == 1].tolist()) == [3, 4]  # no minority: a permutation


def test_lc_update_is_one_backward_of_corrected_ce_plus_gce():
    """Plain SGD (lr 1; the biased model at lr_b_scale = 0.1): each model's change equals
    minus the gradient of its loss, recomputed here from the same mixup draws."""
    method, spec = _toy(LC, "lc", optimizer="sgd", lr=1.0, momentum=0.0, lambda_align=2.0,
                        tau=0.5, ema_alpha=0.9)  # fmt: skip
    batch = toy_batch(spec, n=16)
    model_b, model_d = copy.deepcopy(method.model_b), copy.deepcopy(method.model_d)
    draws = torch.Generator()
    draws.set_state(method.mix_draws.get_state())
    method.update(batch)

    logits_b = model_b(batch.x)
    probs = torch.softmax(logits_b.detach() / 0.5, 1)
    pseudo = probs.argmax(1)
    prior = torch.zeros(4, 4)  # mv, first visits: a loop over the batch in order
    seen = torch.zeros(4, 4, dtype=torch.bool)
    for i in range(16):
        c, a, p = batch.y[i], pseudo[i], probs[i, batch.y[i]]
        prior[c, a] = 0.9 * prior[c, a] + 0.1 * p if seen[c, a] else p
        seen[c, a] = True
    column = prior.sum(0, keepdim=True)  # the toy has no entry: column_norm true (default)
    correction = (prior / column)[:, pseudo].t()
    lam = float(torch.empty(()).uniform_(0.0, 0.5, generator=draws))  # curr_step 0: t = 0.5
    partner = mixup_partners(batch.y, pseudo != batch.y, 4, draws)
    x_mix = lam * batch.x + (1 - lam) * batch.x[partner]
    c_mix = lam * correction + (1 - lam) * correction[partner]
    logits = model_d(x_mix) + torch.log(c_mix + 1e-4)
    expected_d = torch.autograd.grad(F.cross_entropy(logits, batch.y), [*model_d.parameters()])
    gce = 2.0 * generalized_ce(logits_b, batch.y, 0.7).mean()
    expected_b = torch.autograd.grad(gce, [*model_b.parameters()])
    for delta, g in zip(_sgd_deltas(model_d, method.model_d), expected_d, strict=True):
        torch.testing.assert_close(delta, g, atol=1e-6, rtol=1e-5)
    for delta, g in zip(_sgd_deltas(model_b, method.model_b), expected_b, strict=True):
        torch.testing.assert_close(delta, 0.1 * g, atol=1e-6, rtol=1e-5)


# ----------------------------------------------------------------------------- DeNetDM
def test_distillation_loss_by_hand():
    student = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 0.0]], dtype=torch.float64)
    teacher = torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    t = 2.0
    expected = 0.0
    for s_row, t_row in zip(student.tolist(), teacher.tolist(), strict=True):
        z_t = sum(math.exp(v / t) for v in t_row)
        z_s = sum(math.exp(v / t) for v in s_row)
        expected -= sum(
            math.exp(tv / t) / z_t * (sv / t - math.log(z_s))
            for sv, tv in zip(s_row, t_row, strict=True)
        )
    assert distillation_loss(student, teacher, t).item() == pytest.approx(expected / 2 * t**2)


def test_experts_sum_features_under_one_classifier():
    torch.manual_seed(0)
    method, spec = _toy(DeNetDM, "denetdm")
    experts: Experts = method.stage1
    x = toy_batch(spec, n=4).x
    with torch.no_grad():
        both = experts.classifier(experts.first(x) + experts.second(x))
        torch.testing.assert_close(experts(x), both)
        torch.testing.assert_close(experts(x, 1.0, 0.0), experts.classifier(experts.first(x)))
    assert len(experts.second.layers) == 8 and len(experts.first.layers) == 4  # 4 vs 2 layers


def test_denetdm_stage1_trains_its_share_then_stage2_starts_from_it(tmp_path):
    method, _spec = _toy(DeNetDM, "denetdm", total_steps=20, stage1_share=0.5, batch_size=32)
    splits = DATASETS.get("toy")("/nonexistent", "/nonexistent").load(20)
    steps = []
    real_step = method.step

    def counting(loss, *pairs):
        steps.append(1)
        real_step(loss, *pairs)

    method.step = counting  # type: ignore[method-assign]
    before = copy.deepcopy(method.stage1.state_dict())
    method.prepare(splits)
    assert len(steps) == 10  # 0.5 x 20 steps
    changed = [k for k, v in method.stage1.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "stage 1 did not train"
    for key, value in method.stage1.second.state_dict().items():
        assert torch.equal(method.stage2.second.state_dict()[key], value)
    for key, value in method.stage1.classifier.state_dict().items():
        assert torch.equal(method.stage2.classifier.state_dict()[key], value)


def test_denetdm_stage2_update_by_hand():
    """SGD lr 1: the target branch and classifier move by minus the gradient of
    poe * CE(f_t(phi_t + phi_b)) + dist * KD(f_t(phi_t) || f(phi_d)); nothing else moves."""
    method, spec = _toy(DeNetDM, "denetdm", optimizer="sgd", lr=1.0, momentum=0.0,
                        dist_weight=0.5, poe_weight=2.0)  # fmt: skip
    batch = toy_batch(spec, n=8)
    stage1, stage2 = copy.deepcopy(method.stage1), copy.deepcopy(method.stage2)
    method.update(batch)
    feat = stage2.first(batch.x)
    poe = F.cross_entropy(stage2.classifier(feat + stage2.second(batch.x)), batch.y)
    teacher = stage1.classifier(stage1.first(batch.x)).detach()
    soft = torch.softmax(teacher / 2.0, 1)
    kd = -(soft * F.log_softmax(stage2.classifier(feat) / 2.0, 1)).sum(1).mean() * 4.0
    params = [*stage2.first.parameters(), *stage2.classifier.parameters()]
    grads = torch.autograd.grad(2.0 * poe + 0.5 * kd, params)
    moved = [*method.stage2.first.parameters(), *method.stage2.classifier.parameters()]
    for old, new, g in zip(params, moved, grads, strict=True):
        torch.testing.assert_close(old - new, g, atol=1e-6, rtol=1e-5)
    for old, new in zip(stage2.second.parameters(), method.stage2.second.parameters(), strict=True):
        assert torch.equal(old, new)
    for old, new in zip(stage1.parameters(), method.stage1.parameters(), strict=True):
        assert torch.equal(old, new)


# ----------------------------------------------------------------------------- DFR
def test_valid_halves_split_every_group_and_are_seeded():
    valid = DATASETS.get("toy")("/nonexistent", "/nonexistent").load(20).valid
    keep, reweight = valid_halves(valid, 4, seed=0)
    assert sorted([*keep.indices.tolist(), *reweight.indices.tolist()]) == valid.indices.tolist()
    groups = valid.labels * 4 + valid.biases
    for g in torch.unique(groups).tolist():
        n = int((groups == g).sum())
        assert int(((keep.labels * 4 + keep.biases) == g).sum()) == n // 2
    again, _ = valid_halves(valid, 4, seed=0)
    other, _ = valid_halves(valid, 4, seed=1)
    assert torch.equal(again.indices, keep.indices) and not torch.equal(other.indices, keep.indices)


def test_balanced_rows_cut_every_group_to_the_smallest():
    groups = np.array([0] * 5 + [1] * 2 + [3] * 7)
    rows = balanced_rows(groups, np.random.default_rng(0))
    assert np.bincount(groups[rows]).tolist() == [2, 2, 0, 2] and len(set(rows)) == 6


def test_dfr_head_predicts_as_the_averaged_standardised_regressions():
    """The folded head against sklearn itself: one fit (num_retrains 1) on a balanced subsample,
    standardised by the training features; the head's arg-max equals its predictions."""
    method, _spec = _toy(DFR, "dfr", num_retrains=1)
    gen = np.random.default_rng(0)
    x_train, x = gen.normal(size=(200, 6)) * 3 + 1, gen.normal(size=(80, 6))
    y = np.arange(80) % 4
    x[np.arange(80), y] += 2.0
    groups = y * 4 + (np.arange(80) // 4) % 2
    scaler = StandardScaler().fit(x_train)
    coef, intercept = method.retrain(x, y, groups, 0.3, scaler, np.random.default_rng(5))
    rows = balanced_rows(groups, np.random.default_rng(5))
    ref = LogisticRegression(C=0.3, l1_ratio=1.0, solver="liblinear", random_state=0)
    ovr = OneVsRestClassifier(ref).fit(scaler.transform(x[rows]), y[rows])
    ours = (x @ coef.T + intercept).argmax(1)
    assert (ours == ovr.predict(scaler.transform(x))).all()


def test_dfr_reuses_the_stored_vanilla_run_and_matches_training_it(tmp_path, toy_place):
    """The Vanilla run of the cell in the store: DFR loads it (method_record says so) and ends
    exactly where a DFR that trains its own ERM stage does (same model, update for update)."""
    over = {"steps": 30, "eval_every": 10, "batch_size": 32}
    dfr = make_config("dfr", "toy", 20, 0, protocol="clean", overrides=over)
    vanilla = make_config("vanilla", "toy", 20, 0, protocol="clean", overrides=over)
    assert erm_config(dfr).run_id == vanilla.run_id
    shared = RunStore(tmp_path / "shared")
    train_run(vanilla, shared.run(vanilla.run_id), toy_place, CPU)
    reused = train_run(dfr, shared.run(dfr.run_id), toy_place, CPU)
    alone = train_run(dfr, RunStore(tmp_path / "alone").run(dfr.run_id), toy_place, CPU)
    assert reused["method_record"]["erm"] == "reused"
    assert reused["method_record"]["erm_run"] == vanilla.run_id
    assert reused["method_record"]["erm_step"] == 30
    assert alone["method_record"]["erm"] == "trained" and alone["method_record"]["erm_steps"] == 30
    assert reused["steps"] == 1 and reused["selections"] == alone["selections"]
    # the selection rules read one half of the validation split, DFR re-trained on the other
    half = reused["method_record"]["reweight_half"]
    assert reused["selections"]["last"]["valid"]["n"] + half == 128


def test_dfr_yaml_is_vanillas_recipe_on_every_dataset():
    """DFR's ERM stage resolves to the Vanilla run of the same cell (so it can be reused) on
    every dataset, protocol and preset, and with --epochs."""
    for dataset in DATASETS.names():
        if dataset == "toy":
            continue
        ratio = DATASETS.get(dataset).spec.ratios[0]
        for protocol in ("official", "clean"):
            for preset, epochs in (("paper", None), ("quick", 10), ("smoke", None)):
                kw = {"protocol": protocol, "preset": preset, "epochs": epochs}
                dfr = make_config("dfr", dataset, ratio, 0, **kw)
                vanilla = make_config("vanilla", dataset, ratio, 0, **kw)
                assert erm_config(dfr).run_id == vanilla.run_id, (dataset, protocol, preset)


# ----------------------------------------------------------------------------- references
def test_published_numbers_and_a_combined_reference():
    """LC's and DeNetDM's cells as printed (std None where the paper prints none); ``A+B`` adds
    B's cells where A has none and names B's sources; the default reference is unchanged."""
    own = load_paper("lc_denetdm")
    assert own.accuracy[("cmnist", 1.0, "denetdm")] == (85.22, 0.76)
    assert own.accuracy[("cmnist", 5.0, "lc")] == (91.15, None)
    assert own.accuracy[("cifar10c", 0.5, "lc")] == (34.56, 0.69)
    assert (
        own.short_source().startswith("lc: Liu et al.")
        and "denetdm: Sreelatha" in own.short_source()
    )
    default = load_paper()
    both = load_paper("etf_debias_cvpr2024+lc_denetdm")
    assert ("cmnist", 1.0, "lc") not in default.accuracy and default.sources == {}
    assert {k: v for k, v in both.accuracy.items() if k in default.accuracy} == default.accuracy
    assert both.accuracy[("bar", 5.0, "denetdm")] == (79.61, 3.18)
    assert both.short_source().startswith(default.short_source() + "; lc: Liu et al.")


# ----------------------------------------------------------------------------- real data
@pytest.mark.realdata
def test_each_beats_vanilla_on_real_colored_mnist(tmp_path, raw_root, data_root):
    """Colored MNIST at 1 %, clean, seed 0, a 12,000-image training subset, 4 epochs of the
    quick preset (47 steps each), 2,000 test images: each method's bias-conflicting test
    accuracy exceeds Vanilla's by 5 points (the test set's conflicting share is 90 %)."""
    place = DataPlace(raw_root, data_root)
    store = RunStore(tmp_path)
    over = {"train_limit": 12000, "eval_limit": 2000, "num_threads": 1}

    def conflicting(method):
        config = make_config(method, "cmnist", 1.0, 0, protocol="clean", preset="quick",
                             epochs=4, overrides=over)  # fmt: skip
        result = train_run(config, store.run(config.run_id), place, CPU)
        return result, result["selections"]["last"]["test"]["conflicting_accuracy"]

    _, vanilla = conflicting("vanilla")
    for method in ("lc", "denetdm", "dfr"):
        result, ours = conflicting(method)
        assert ours > vanilla + 5, (method, ours, vanilla)
    assert result["method_record"]["erm"] == "reused"  # DFR on the Vanilla run above


def test_dfr_imports_scikit_learn_only_to_fit():
    """Reading a run store imports every method's module (its code hash): DFR's leaves
    scikit-learn, seconds to import, to its last-layer fit."""
    code = "import sys, debias_bench.methods.dfr; print('sklearn' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
