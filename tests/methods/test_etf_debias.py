from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from support.methods_helpers import toy_batch

from debias_bench.config.run_config import resolve_hparams
from debias_bench.methods.etf_debias import ETFDebias, random_primes, simplex_etf
from debias_bench.registry import DATASETS
from debias_bench.training.method import TrainEnv


@pytest.mark.parametrize(("dim", "k"), [(100, 10), (64, 10), (64, 2), (512, 6)])
def test_simplex_etf_geometry(dim, k):
    m = simplex_etf(dim, k, torch.Generator().manual_seed(0)).double()
    assert m.shape == (dim, k)
    torch.testing.assert_close(m.norm(dim=0), torch.ones(k, dtype=torch.float64), atol=1e-6, rtol=0)
    cos = m.t() @ m
    for i, j in itertools.combinations(range(k), 2):
        assert cos[i, j].item() == pytest.approx(-1 / (k - 1), abs=1e-6)
    # the vertices are centred: they sum to zero
    torch.testing.assert_close(m.sum(1), torch.zeros(dim, dtype=torch.float64), atol=1e-6, rtol=0)


def test_simplex_etf_needs_enough_dimensions():
    with pytest.raises(ValueError, match="dim >= 10"):
        simplex_etf(5, 10, torch.Generator())


def test_random_primes_are_not_an_etf():
    m = random_primes(100, 10, torch.Generator().manual_seed(0))
    cos = F.normalize(m, dim=0).t() @ F.normalize(m, dim=0)
    off = cos[~torch.eye(10, dtype=torch.bool)]
    assert off.std() > 0.02  # unequal angles, unlike the ETF


def _method(seed=0):
    spec = DATASETS.get("cmnist").spec
    hp = resolve_hparams("etf_debias", "cmnist")
    torch.manual_seed(seed)
    env = TrainEnv(torch.device("cpu"), 100, 1, 10, seed)
    return ETFDebias(spec, hp, env), spec


def test_single_forward_loss_equals_the_official_two_pass_form():
    """Official: L_RE = CE(logit(x, m_b) - logit(x, 0), b), two forward passes."""
    method, spec = _method()
    batch = toy_batch(spec, n=32)
    d = method.dim

    ce, re = method.losses(batch)
    ours = ce + 0.8 * re
    grads_ours = torch.autograd.grad(
        ours, [*method.backbone.parameters(), method.classifier.weight]
    )

    def model(x, prime):  # the official model.forward(x, attr_feat=prime)
        return method.classifier(torch.cat([method.backbone(x), prime], dim=1))

    prime = method.prime_bank(batch.b)
    logit = model(batch.x, prime)
    logit_clean = model(batch.x, torch.zeros_like(prime))
    official = F.cross_entropy(logit, batch.y) + 0.8 * F.cross_entropy(logit - logit_clean, batch.b)
    grads_official = torch.autograd.grad(
        official, [*method.backbone.parameters(), method.classifier.weight]
    )
    torch.testing.assert_close(ours, official)
    for g_ours, g_official in zip(grads_ours, grads_official, strict=True):
        torch.testing.assert_close(g_ours, g_official)
    # L_RE reaches only the prime half of the classifier
    g_re = torch.autograd.grad(method.losses(batch)[1], method.classifier.weight)[0]
    assert g_re[:, :d].abs().max() == 0 and g_re[:, d:].abs().max() > 0


def test_prediction_uses_the_null_prime():
    method, spec = _method()
    batch = toy_batch(spec, n=8)
    with torch.no_grad():
        h = method.backbone(batch.x)
        expected = method.classifier(torch.cat([h, torch.zeros_like(h)], dim=1))
        torch.testing.assert_close(method.predict(batch.x), expected)


def test_primes_are_fixed_and_retrieved_by_bias_label():
    method, spec = _method()
    before = method.prime_bank.primes.clone()
    batch = toy_batch(spec, n=64)
    for _ in range(3):
        method.update(batch)
    torch.testing.assert_close(method.prime_bank.primes, before)
    torch.testing.assert_close(method.prime_bank(batch.b), before[batch.b])
    assert not any(
        p is method.prime_bank.primes for p in method.optimizer.param_groups[0]["params"]
    )


def test_skip_when_more_biases_than_classes():
    spec = DATASETS.get("cmnist").spec
    import dataclasses

    wide = dataclasses.replace(spec, num_biases=12)
    assert "num_biases <= num_classes" in ETFDebias.skip(wide, {})
    assert ETFDebias.skip(spec, {}) is None


def test_update_returns_the_loss_terms():
    method, spec = _method()
    out = method.update(toy_batch(spec, n=16))
    assert set(out) == {"loss", "ce", "re"}
    assert out["loss"].item() == pytest.approx(out["ce"].item() + 0.8 * out["re"].item(), rel=1e-5)
    assert isinstance(out["loss"], torch.Tensor) and not out["loss"].requires_grad
