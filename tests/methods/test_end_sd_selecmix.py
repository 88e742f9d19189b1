"""EnD, SD and SelecMix: core math on hand-made tensors, method behaviour, YAML defaults."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from support.methods_helpers import toy_batch

from debias_bench.config.run_config import method_yaml, resolve_hparams
from debias_bench.data.contract import Batch
from debias_bench.methods.contrastive import (
    contradicting_partners,
    gsc_loss,
    make_embedding_model,
    selective_mixup,
)
from debias_bench.methods.end import end_regularisers
from debias_bench.methods.sd import ShortcutDebias
from debias_bench.methods.selecmix import SelecMix, mini_batches
from debias_bench.registry import DATASETS, METHODS
from debias_bench.training.method import TrainEnv

# ----------------------------------------------------------------------------------- EnD
# Five unit features in 2-D, with (label, bias):
#   0: (1, 0)     y0 b0        Gram entries below the diagonal (pairs i > j):
#   1: (0, 1)     y0 b1        G10 = 0,   G20 = 1,   G21 = 0,   G30 = .6, G31 = .8,
#   2: (1, 0)     y1 b0        G32 = .6,  G40 = 0,   G41 = -1,  G42 = 0,  G43 = -.8
#   3: (.6, .8)   y0 b0
#   4: (0, -1)    y1 b1
FEATS = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8], [0.0, -1.0]])
LABELS = torch.tensor([0, 0, 1, 0, 1])
BIASES = torch.tensor([0, 1, 0, 0, 1])


def test_end_r_perp_by_hand():
    """Same-bias pairs: bias 0 {(2,0): 1, (3,0): .6, (3,2): .6} sums to 2.2; bias 1 {(4,1): -1}.
    The absolute value is taken per bias class, then divided by all 4 pairs:
    (|2.2| + |-1|) / 4 = 0.8 (a signed sum would give 0.3)."""
    r_perp, _ = end_regularisers(FEATS, LABELS, BIASES, "all")
    assert r_perp.item() == pytest.approx(0.8)


def test_end_r_par_by_hand_all_pairs():
    """Same class, different bias: (1,0): G 0, (3,1): G .8, (4,2): G 0.
    R_par = 1 - mean((1 + G) / 2) = 1 - (.5 + .9 + .5) / 3 = 0.36667."""
    _, r_par = end_regularisers(FEATS, LABELS, BIASES, "all")
    assert r_par.item() == pytest.approx(1 - 1.9 / 3)


def test_end_r_par_by_hand_official_pairs():
    """The official loop counts a pair (i > j) only when b_i < b_j: of the three pairs only
    (3,1) has b_3 = 0 < b_1 = 1, so R_par = 1 - (1 + .8) / 2 = 0.1."""
    _, r_par = end_regularisers(FEATS, LABELS, BIASES, "official")
    assert r_par.item() == pytest.approx(0.1)


def _official_loops(d, y, b):
    """A literal transcription of EnD.py's loops (abs_orthogonal_blind / abs_parallel)."""
    gram = torch.tril(d @ d.t(), diagonal=-1).clamp(-1, 1)
    r_perp, m_tot = torch.tensor(0.0), 0.0
    for bc in torch.unique(b):
        mask = (b == bc).float()[:, None]
        mask = torch.tril(mask @ mask.t(), diagonal=-1)
        m_tot += mask.sum()
        if mask.sum() > 0:
            r_perp = r_perp + (gram * mask).sum().abs()
    r_perp = r_perp / m_tot if m_tot > 0 else r_perp
    r_par, m_tot = torch.tensor(0.0), 0.0
    classes = torch.unique(b)
    for t in torch.unique(y):
        cm = (y == t).float()[:, None]
        for idx, bc in enumerate(classes):
            for other in classes[idx:]:
                if other == bc:
                    continue
                u, v = cm * (b == bc).float()[:, None], cm * (b == other).float()[:, None]
                mask = torch.tril(u @ v.t(), diagonal=-1)
                m_tot += mask.sum()
                if mask.sum() > 0:
                    r_par = r_par - ((1 + gram) * mask * 0.5).sum()
    r_par = 1 + r_par / m_tot if m_tot > 0 else r_par
    return r_perp, r_par


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_end_vectorised_equals_official_loops(seed):
    g = torch.Generator().manual_seed(seed)
    d = F.normalize(torch.randn(40, 6, generator=g), dim=1)
    y = torch.randint(0, 3, (40,), generator=g)
    b = torch.randint(0, 4, (40,), generator=g)
    ours = end_regularisers(d, y, b, "official")
    ref = _official_loops(d, y, b)
    for a, r in zip(ours, ref, strict=True):
        assert a.item() == pytest.approx(r.item(), abs=1e-6)
    # counting every pair gives a different (less noisy) estimate of the same quantity
    assert end_regularisers(d, y, b, "all")[1].item() != pytest.approx(ref[1].item(), abs=1e-6)


def test_end_without_pairs_is_zero():
    d = F.normalize(torch.randn(3, 4), dim=1)
    r_perp, r_par = end_regularisers(d, torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2]), "all")
    assert r_perp.item() == 0 and r_par.item() == 0  # no same-bias pair, no same-class pair


def test_end_batch_smaller_than_the_number_of_biases():
    """A last batch of 2 samples with bias values up to 9 (Corrupted CIFAR-10) is fine."""
    d = F.normalize(torch.randn(2, 4), dim=1)
    r_perp, _ = end_regularisers(d, torch.tensor([3, 3]), torch.tensor([9, 9]), "all", 10)
    assert r_perp.item() == pytest.approx(abs((d[0] @ d[1]).item()), abs=1e-6)


def test_end_gradients_pull_and_push():
    """R_par pulls a same-class different-bias pair together, R_perp pushes a same-bias pair
    apart: one gradient step on each increases / decreases their cosine."""
    d = torch.tensor([[1.0, 0.2], [0.2, 1.0]], requires_grad=True)
    y, b_diff, b_same = torch.tensor([0, 0]), torch.tensor([0, 1]), torch.tensor([0, 0])

    def cosine(x):
        n = F.normalize(x, dim=1)
        return (n[0] @ n[1]).item()

    before = cosine(d)
    (grad_par,) = torch.autograd.grad(end_regularisers(F.normalize(d, dim=1), y, b_diff)[1], d)
    (grad_perp,) = torch.autograd.grad(end_regularisers(F.normalize(d, dim=1), y, b_same)[0], d)
    assert cosine(d - 0.1 * grad_par) > before > cosine(d - 0.1 * grad_perp)


# ----------------------------------------------------------------------------------- GSC
# z0 = z1 = (1, 0) with label 0, z2 = (0, 1) with label 1, temperature 1. For anchor 0 the
# candidates are 1 (sim 1) and 2 (sim 0): log p_01 = 1 - log(e + 1); same for anchor 1; anchor
# 2 has no positive and adds 0. SupCon = -(2 log p_01) / 3 = 2 (log(1 + e) - 1) / 3.
Z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
ZY = torch.tensor([0, 0, 1])


def test_supcon_by_hand():
    expected = 2 * (math.log(1 + math.e) - 1) / 3
    assert gsc_loss(Z, ZY, temp=1.0, q=None).item() == pytest.approx(expected, rel=1e-6)


def test_gsc_by_hand_and_its_gradient_is_the_weighted_supcon_gradient():
    """GSC multiplies each positive log-prob by q p^q (p detached): here p = e / (1 + e) for
    both positive pairs, so loss and gradient are SupCon's times 0.7 * p^0.7."""
    p = math.e / (1 + math.e)
    w = 0.7 * p**0.7
    expected = w * 2 * (math.log(1 + math.e) - 1) / 3
    z = Z.clone().requires_grad_(True)
    loss = gsc_loss(z, ZY, temp=1.0, q=0.7)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    (g_gsc,) = torch.autograd.grad(loss, z)
    (g_sup,) = torch.autograd.grad(gsc_loss(z, ZY, temp=1.0, q=None), z)
    torch.testing.assert_close(g_gsc, w * g_sup)


def test_gsc_temperature_scales_similarities():
    """With temperature 0.5 the similarities double: log p_01 = 2 - log(e^2 + 1)."""
    expected = 2 * (math.log(math.e**2 + 1) - 2) / 3
    assert gsc_loss(Z, ZY, temp=0.5, q=None).item() == pytest.approx(expected, rel=1e-6)


# ------------------------------------------------------------------------ SelecMix pairs
SIM = torch.tensor(
    [
        [1.0, 0.2, 0.9, 0.5],
        [0.2, 1.0, 0.1, 0.3],
        [0.9, 0.1, 1.0, 0.4],
        [0.5, 0.3, 0.4, 1.0],
    ]
)
SIM_Y = torch.tensor([0, 0, 1, 1])


@pytest.mark.parametrize("strict", [True, False])
def test_intra_pairs_are_the_least_similar_of_the_same_label(strict):
    """0: same label {0: 1, 1: .2} -> 1; 1: {0: .2, 1: 1} -> 0; 2: {2: 1, 3: .4} -> 3; 3 -> 2."""
    assert contradicting_partners(SIM, SIM_Y, "intra", strict).tolist() == [1, 0, 3, 2]


@pytest.mark.parametrize("strict", [True, False])
def test_inter_pairs_are_the_most_similar_of_another_label(strict):
    """0: other label {2: .9, 3: .5} -> 2; 1: {2: .1, 3: .3} -> 3; 2: {0: .9, 1: .1} -> 0;
    3: {0: .5, 1: .3} -> 0."""
    assert contradicting_partners(SIM, SIM_Y, "inter", strict).tolist() == [2, 3, 0, 0]


def test_official_inter_masking_can_pick_an_inadmissible_partner():
    """Row 1's other-label similarities are -.5 and -.2: the official ``sim * mask`` leaves 0 on
    the masked same-label entries, which win the arg-max (index 0, the same label)."""
    sim = SIM.clone()
    sim[1, 2], sim[1, 3] = -0.5, -0.2
    assert contradicting_partners(sim, SIM_Y, "inter", strict=False)[1].item() == 0
    assert contradicting_partners(sim, SIM_Y, "inter", strict=True)[1].item() == 3


def test_strict_partners_without_candidates_are_the_anchor_itself():
    same = torch.zeros(3, dtype=torch.long)
    sim = torch.eye(3)
    assert contradicting_partners(sim, same, "inter", strict=True).tolist() == [0, 1, 2]
    alone = torch.tensor([0, 1, 2])
    assert contradicting_partners(sim, alone, "intra", strict=True).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="unknown pairing"):
        contradicting_partners(sim, alone, "both")


def test_selective_mixup_takes_the_partners_label():
    """x_mix = lam x + (1 - lam) x_partner, label = y_partner."""
    x = torch.tensor([[0.0], [10.0], [20.0], [30.0]])
    y = torch.tensor([0, 1, 2, 3])
    partner = torch.tensor([2, 3, 0, 0])
    lam = torch.tensor([0.5, 0.0, 0.25, 0.1])
    x_mix, y_mix = selective_mixup(x, y, partner, lam)
    torch.testing.assert_close(x_mix, torch.tensor([[10.0], [30.0], [5.0], [3.0]]))
    assert y_mix.tolist() == [2, 3, 0, 0]


def test_mini_batches_split_the_big_batch():
    torch.manual_seed(0)
    chunks = mini_batches(1024, 256)
    assert [len(c) for c in chunks] == [256] * 4
    assert sorted(torch.cat(chunks).tolist()) == list(range(1024))
    assert [len(c) for c in mini_batches(600, 256)] == [256, 256]  # incomplete one dropped
    assert [len(c) for c in mini_batches(100, 256)] == [100]  # small batch used whole


def _method(name, dataset="toy", **overrides):
    spec = DATASETS.get(dataset).spec
    hp = {**resolve_hparams(name, dataset, "clean"), **overrides}
    torch.manual_seed(0)
    return METHODS.get(name)(spec, hp, TrainEnv(torch.device("cpu"), 64, 2, 10, 0)), spec


def _adam_steps(optimizer):
    return {int(s["step"]) for s in optimizer.state.values()}


@pytest.mark.parametrize("base", ["vanilla", "lff"])
def test_selecmix_update_makes_one_step_per_mini_batch(base):
    method, spec = _method(
        "selecmix", base=base, mini_batch_size=16, aux_backbone="mlp", aux_mlp_hidden=[32]
    )
    assert isinstance(method, SelecMix)
    scalars = method.update(toy_batch(spec, n=64))
    assert _adam_steps(method.optimizer) == {4}
    assert _adam_steps(method.aux_optimizer) == {4}
    assert scalars["intra"] in (0.0, 1.0)
    if base == "lff":
        assert _adam_steps(method.optimizer_b) == {4}
        assert bool(method.ema_b.visited[:64].all()) and bool(method.ema_d.visited[:64].all())
    else:
        assert not hasattr(method, "model_b")


@pytest.mark.parametrize(
    ("base", "overrides", "expected"),
    [
        ("vanilla", {}, (1.0, 0.0)),  # configs/v_ours.cfg
        ("lff", {}, (0.1, 1.0)),  # configs/l_ours.cfg: base=lff brings its own weights
        ("lff", {"mix_weight": 0.5}, (0.5, 1.0)),  # an explicit value wins
        ("vanilla", {"clean_weight": 0.25}, (1.0, 0.25)),
    ],
)
def test_selecmix_loss_weights_follow_the_base(base, overrides, expected):
    method, _ = _method("selecmix", base=base, aux_backbone="mlp", **overrides)
    assert (method.mix_weight, method.clean_weight) == expected


def test_end_official_schedule_is_ends_own_and_clean_keeps_a_constant_lr():
    official = resolve_hparams("end", "cmnist", "official")
    clean = resolve_hparams("end", "cmnist", "clean")
    assert (official["lr_step_epochs"], official["lr_gamma"]) == (20, 0.1)
    assert (clean["lr_step_epochs"], clean["lr_gamma"]) == (None, 1.0)


def test_selecmix_trains_the_official_auxiliary_resnet18_with_gsc():
    method, spec = _method("selecmix", mini_batch_size=4)  # aux_backbone: cifar_resnet18
    batch = toy_batch(spec, n=8)
    before = [p.detach().clone() for p in method.aux.parameters()]
    scalars = method.update(batch)
    assert _adam_steps(method.aux_optimizer) == {2}
    assert scalars["gsc"].item() > 0
    assert any(not torch.equal(a, p) for a, p in zip(before, method.aux.parameters(), strict=True))


def test_selecmix_mixes_with_the_partner_and_lam_at_most_half():
    method, spec = _method("selecmix", aux_backbone="mlp", aux_mlp_hidden=[32])
    batch = toy_batch(spec, n=32)
    torch.manual_seed(1)
    x_mix, y_mix, intra = method.mix(batch)
    with torch.no_grad():
        z = method.aux(batch.x)
    mode = "intra" if bool(intra) else "inter"
    partner = contradicting_partners(z @ z.t(), batch.y, mode, strict=True)
    assert torch.equal(y_mix, batch.y[partner])
    # x_mix - x_p = lam (x - x_p): recover lam where x differs from its partner
    diff, offset = batch.x - batch.x[partner], x_mix - batch.x[partner]
    keep = diff.flatten(1).abs().max(dim=1).values > 1e-3
    lam = (offset.flatten(1)[keep] * diff.flatten(1)[keep]).sum(1) / diff.flatten(1)[keep].pow(
        2
    ).sum(1)
    assert keep.any() and bool(((lam >= -1e-5) & (lam <= 0.5 + 1e-5)).all())


def test_selecmix_coin_is_fair():
    method, _ = _method("selecmix", aux_backbone="mlp")
    torch.manual_seed(0)
    intra = sum(bool(method.intra_draw()) for _ in range(400))
    assert 160 < intra < 240
    method.hp = dataclasses.replace(method.hp, pairing="inter")
    assert {bool(method.intra_draw()) for _ in range(10)} == {False}


def test_official_auxiliary_model_is_a_cifar_resnet18_with_a_128d_head():
    spec = DATASETS.get("toy").spec
    hp = SelecMix.Params.of(resolve_hparams("selecmix", "toy"))
    model = make_embedding_model(spec, hp)
    assert model.encoder.feat_dim == 512 and model.encoder.conv1.stride == (1, 1)
    assert isinstance(model.encoder.maxpool, torch.nn.Identity)
    z = model(torch.rand(4, 3, 8, 8))
    assert z.shape == (4, 128)
    torch.testing.assert_close(z.norm(dim=1), torch.ones(4))


# ------------------------------------------------------------------------------------ SD
def test_sd_prediction_ignores_the_shortcut():
    method, spec = _method("sd")
    assert isinstance(method, ShortcutDebias)
    batch = toy_batch(spec, n=8)
    d = method.dim
    with torch.no_grad():
        method.classifier.weight.normal_()
        h = method.backbone(batch.x)
        w_h, w_s = method.classifier.weight[:, :d], method.classifier.weight[:, d:]
        s = method.shortcuts(batch.b)
        # training logits carry the shortcut, prediction is the intervention do(s = 0)
        torch.testing.assert_close(method.logits(batch.x, s), h @ w_h.t() + s @ w_s.t())
        before, trained = method.predict(batch.x), method.logits(batch.x, s)
        torch.testing.assert_close(before, h @ w_h.t())
        method.classifier.weight[:, d:].normal_()  # any other shortcut weights
        torch.testing.assert_close(method.predict(batch.x), before)
        assert not torch.allclose(method.logits(batch.x, s), trained)


def test_sd_shortcuts_are_fixed_centred_and_scaled():
    method, spec = _method("sd", shortcut="etf", shortcut_scale=30.0)
    s = method.shortcuts.primes  # K x d
    assert s.shape == (spec.num_biases, method.dim)
    torch.testing.assert_close(s.norm(dim=1), torch.full((spec.num_biases,), 30.0))
    torch.testing.assert_close(s.sum(0), torch.zeros(method.dim), atol=1e-4, rtol=0)
    assert not any(p is s for p in method.shortcuts.parameters())  # a buffer, not trained
    onehot, _ = _method("sd", shortcut="onehot", shortcut_scale=2.0)
    torch.testing.assert_close(onehot.shortcuts(torch.tensor([1])), 2.0 * torch.eye(100)[[1]])
    with pytest.raises(ValueError, match="unknown shortcut"):
        _method("sd", shortcut="gaussian")


def test_sd_loss_is_cross_entropy_with_the_shortcut():
    method, spec = _method("sd")
    batch = toy_batch(spec, n=16)
    expected = F.cross_entropy(method.logits(batch.x, method.shortcuts(batch.b)), batch.y)
    assert method.update(batch)["loss"].item() == pytest.approx(expected.item(), rel=1e-6)


def test_end_update_logs_both_regularisers():
    method, spec = _method("end", alpha=0.5, beta=2.0)
    batch = toy_batch(spec, n=16)
    d = method.model.features(batch.x)
    torch.testing.assert_close(d.norm(dim=1), torch.ones(16))  # the head reads unit features
    r_perp, r_par = end_regularisers(d, batch.y, batch.b, "all")
    ce = F.cross_entropy(method.model.head(d), batch.y)
    out = method.update(Batch(batch.index, batch.x, batch.y, batch.b))
    assert out["loss"].item() == pytest.approx((ce + 0.5 * r_perp + 2.0 * r_par).item(), rel=1e-5)


# ------------------------------------------------------------------ YAML vs METHODS.md
def _yaml_values(method: str, dataset: str, protocol: str = "official") -> dict:
    """The method's own layers (defaults < datasets.<name> < protocols.<name>), so datasets
    that are not registered yet can be checked too (per-ratio and per-preset layers left out)."""
    doc = method_yaml(method)
    per_dataset = dict((doc.get("datasets") or {}).get(dataset) or {})
    per_dataset.pop("ratios", None)
    per_dataset.pop("presets", None)
    return {
        **(doc.get("defaults") or {}),
        **per_dataset,
        **((doc.get("protocols") or {}).get(protocol) or {}),
    }


# (method, dataset, protocol, key, value, source in ../shared/reference/METHODS.md)
TABLE = [
    # SelecMix, section 8.3 / 8.4 (configs/*.cfg, learner.py)
    ("selecmix", "cmnist", "official", "lr", 5e-3, "8.4 cmnist lr 5e-3"),
    ("selecmix", "cmnist", "official", "proj_optimizer", "adam", "8.4 cmnist proj adam"),
    ("selecmix", "cmnist", "official", "proj_lr", 1e-2, "8.4 cmnist 0.5/1/2pct proj_lr 0.01"),
    ("selecmix", "cmnist", "official", "batch_size", 1024, "8.4 big batch 1024"),
    ("selecmix", "cmnist", "official", "mini_batch_size", 256, "8.4 mini batch 256"),
    ("selecmix", "cmnist", "official", "epochs", 200, "8.4 200 epochs"),
    ("selecmix", "cmnist", "official", "mlp_hidden", [100, 100, 16], "8.1 MLP 100-100-16"),
    ("selecmix", "cifar10c", "official", "lr", 1e-3, "8.4 cifar10c lr 1e-3"),
    ("selecmix", "cifar10c", "official", "proj_lr", 1e-3, "8.4 cifar10c proj adam 1e-3"),
    ("selecmix", "cifar10c", "official", "batch_size", 1024, "8.4 1024 / 256"),
    ("selecmix", "cifar10c", "official", "mini_batch_size", 256, "8.4 1024 / 256"),
    ("selecmix", "cifar10c", "official", "epochs", 300, "8.4 300 epochs"),
    ("selecmix", "cifar10c", "official", "backbone", "resnet18", "8.1 torchvision ResNet-18"),
    ("selecmix", "bffhq", "official", "lr", 1e-4, "8.4 bffhq lr 1e-4"),
    ("selecmix", "bffhq", "official", "proj_optimizer", "sgd", "8.4 bffhq proj sgd"),
    ("selecmix", "bffhq", "official", "proj_lr", 0.4, "8.4 bffhq proj_lr 0.4"),
    ("selecmix", "bffhq", "official", "batch_size", 256, "8.4 256 / 64"),
    ("selecmix", "bffhq", "official", "mini_batch_size", 64, "8.4 256 / 64"),
    ("selecmix", "bffhq", "official", "epochs", 200, "8.4 200 epochs"),
    ("selecmix", "cmnist", "official", "optimizer", "adam", "8.4 Adam, wd 0"),
    ("selecmix", "cmnist", "official", "weight_decay", 0.0, "8.4 Adam, wd 0"),
    ("selecmix", "cmnist", "official", "tau", 0.2, "8.3 v_ours.cfg tau 0.2"),
    ("selecmix", "cmnist", "official", "gsc_q", 0.7, "8.3 gsc_q 0.7"),
    ("selecmix", "cmnist", "official", "mix_weight", None, "8.3 a: the base's own"),
    ("selecmix", "cmnist", "official", "clean_weight", None, "8.3 b: the base's own"),
    ("selecmix", "cmnist", "official", "pairing", "rand", "8.3 v_ours rand"),
    ("selecmix", "cmnist", "official", "base", "vanilla", "8.3 Vanilla+SelecMix"),
    ("selecmix", "cmnist", "official", "aux_backbone", "cifar_resnet18", "8.1 SupConResNet"),
    ("selecmix", "cmnist", "official", "aux_embed_dim", 128, "8.1 head 512-512-128"),
    ("selecmix", "cmnist", "official", "proj_weight_decay", 1e-4, "8.1 proj wd 1e-4"),
    ("selecmix", "cmnist", "official", "strict_pairs", False, "8.2 official masking"),
    ("selecmix", "cmnist", "clean", "strict_pairs", True, "departure under clean"),
    ("selecmix", "cmnist", "official", "q", 0.7, "3.1 GCE q 0.7 (LfF+SelecMix)"),
    ("selecmix", "cmnist", "official", "ema_alpha", 0.7, "3.3 EMA 0.7"),
    # EnD, section 6 (configs.py: Adam 1e-3, wd 1e-4; batch 256)
    ("end", "cmnist", "official", "optimizer", "adam", "6.2 Adam"),
    ("end", "cmnist", "official", "lr", 1e-3, "6.2 lr 1e-3"),
    ("end", "cmnist", "official", "weight_decay", 1e-4, "6.2 wd 1e-4"),
    ("end", "cmnist", "official", "batch_size", 256, "6.2 batch 256"),
    ("end", "cmnist", "official", "par_pairs", "official", "6.1 tril (b, b') convention"),
    ("end", "cmnist", "clean", "par_pairs", "all", "departure under clean"),
    ("end", "cmnist", "official", "lr_step_epochs", 20, "6.2 StepLR(20, 0.1)"),
    ("end", "cmnist", "official", "lr_gamma", 0.1, "6.2 StepLR(20, 0.1)"),
    ("end", "cifar10c", "official", "backbone", "resnet20_kaiming", "3.2 LfF ResNet-20 recipe"),
    # SD: no source (section 7); the optimisation follows ETF-Debias (section 1.4 / paper B.2)
    ("sd", "cmnist", "official", "lr", 1e-3, "1.4 ColoredMNIST Adam 1e-3"),
    ("sd", "cmnist", "official", "weight_decay", 1e-5, "1.4 wd 1e-5"),
    ("sd", "cmnist", "official", "batch_size", 256, "1.4 batch 256"),
    ("sd", "cmnist", "official", "epochs", 200, "1.4 200 epochs"),
    ("sd", "cifar10c", "official", "lr", 1e-2, "paper B.2 lr 1e-2"),
    ("sd", "cifar10c", "official", "weight_decay", 2e-4, "paper B.2 wd 2e-4"),
    ("sd", "bffhq", "official", "lr", 1e-4, "paper B.2 real-world lr 1e-4"),
    ("sd", "bffhq", "official", "batch_size", 64, "paper B.2 batch 64"),
]


@pytest.mark.parametrize(("method", "dataset", "protocol", "key", "value", "source"), TABLE)
def test_yaml_defaults_match_methods_md(method, dataset, protocol, key, value, source):
    got = _yaml_values(method, dataset, protocol)
    assert key in got, f"{method}/{dataset}: {key} missing ({source})"
    if isinstance(value, float):
        assert got[key] == pytest.approx(value), source
    else:
        assert got[key] == value, source


@pytest.mark.parametrize("method", ["end", "sd", "selecmix"])
def test_resolved_cmnist_config_carries_the_yaml(method):
    """The engine's resolution (defaults < datasets < protocols) sees the same values."""
    for protocol in ("official", "clean"):
        hp = resolve_hparams(method, "cmnist", protocol)
        for key, value in _yaml_values(method, "cmnist", protocol).items():
            assert hp[key] == value, (method, protocol, key)


def test_registry_metadata():
    for name, display, needs in [
        ("end", "EnD", True),
        ("sd", "SD", True),
        ("selecmix", "SelecMix", False),
    ]:
        entry = METHODS.entry(name)
        assert entry.display_name == display
        assert entry.meta["needs_bias_labels"] is needs
        assert entry.meta["cost"] and entry.citation


def test_selecmix_cmnist_5pct_uses_its_own_auxiliary_lr():
    """8.4: cmnist_5pct.cfg sets proj_lr 0.02; the other ratios 0.01."""
    assert resolve_hparams("selecmix", "cmnist", ratio=5.0)["proj_lr"] == pytest.approx(0.02)
    assert resolve_hparams("selecmix", "cmnist", ratio=1.0)["proj_lr"] == pytest.approx(0.01)
