"""EnD, SD and SelecMix measurably debias on real Colored MNIST at 1 % bias-conflicting samples.

Each method is compared with Vanilla trained with the same protocol (clean) and length (5
epochs of the quick preset), seed 0, on the bias-conflicting samples of the unbiased test set.
Hyperparameters are the YAML defaults (EnD's alpha = beta = 1 and SD's ETF shortcut of norm 10
were chosen on the *validation* split; see the modules), except SelecMix's auxiliary encoder:
the official CIFAR ResNet-18 takes about 100 s per big batch on one CPU core, so the test uses
an MLP 100-100-100 encoder (``aux_backbone=mlp``), which is not the official configuration.
"""

from __future__ import annotations

import pytest
from support.methods_helpers import real_cmnist_run

from debias_bench.paths import DataPlace

pytestmark = pytest.mark.realdata

EPOCHS = 5
OVERRIDES = {
    "end": {},
    "sd": {},
    "selecmix": {"aux_backbone": "mlp", "aux_mlp_hidden": [100, 100, 100]},
}


def _test_metrics(method, tmp_path, raw_root, data_root, overrides=None):
    place = DataPlace(raw_root, data_root)
    result = real_cmnist_run(method, tmp_path, place, epochs=EPOCHS, overrides=overrides)
    assert result["epochs"] == pytest.approx(EPOCHS)
    test = result["selections"]["last"]["test"]
    keys = ("accuracy", "conflicting_accuracy", "aligned_accuracy")
    print(method, " / ".join(f"{test[k]:.1f}" for k in keys), f"{result['train_time_s']:.0f} s")
    return test


@pytest.fixture(scope="module")
def vanilla(tmp_path_factory, raw_root, data_root):
    """Measured (1 thread): unbiased 53.6, bias-conflicting 48.5, aligned 99.7."""
    return _test_metrics("vanilla", tmp_path_factory.mktemp("vanilla"), raw_root, data_root)


def _beats_vanilla(method, vanilla, tmp_path, raw_root, data_root):
    ours = _test_metrics(method, tmp_path, raw_root, data_root, OVERRIDES[method])
    assert ours["conflicting_accuracy"] > vanilla["conflicting_accuracy"] + 15, (ours, vanilla)
    assert ours["accuracy"] > vanilla["accuracy"] + 10
    # debiasing, not just a different failure: Vanilla's aligned accuracy is 99.7
    assert ours["aligned_accuracy"] > 80


@pytest.mark.parametrize("method", ["end", "sd"])
def test_beats_vanilla_on_bias_conflicting_samples(method, vanilla, tmp_path, raw_root, data_root):
    """Measured (seed 0, pytest on 1 CPU thread; test accuracy, unbiased / conflicting /
    aligned; wall time of one run, machine shared with other jobs):

    Vanilla 53.6 / 48.5 / 99.7   8 s
    EnD     85.1 / 83.6 / 99.0   12 s
    SD      79.4 / 77.4 / 97.2   10 s

    Ablations (1 thread, same settings): EnD with alpha = beta = 0 (only the normalised head
    and wd 1e-4) 59.9 / 55.5, so the regularisers do the work; alpha only 52.9 / 47.7, beta
    only 76.0 / 73.4. SD with a one-hot (uncentred) shortcut of norm 30: 65.5 / 61.9.
    Official protocol, 5 epochs (1 thread): Vanilla 23.2 / 14.8, EnD 59.2 / 55.4, SD 38.5 / 36.9.
    """
    _beats_vanilla(method, vanilla, tmp_path, raw_root, data_root)


@pytest.mark.slow
def test_selecmix_beats_vanilla_on_bias_conflicting_samples(vanilla, tmp_path, raw_root, data_root):
    """Measured (as above; 5 epochs = 53 big batches of 1024 per epoch with 4 optimiser steps
    each, against Vanilla's 211 steps of 256 per epoch; about 3x Vanilla's cost per epoch):

    SelecMix (Vanilla+SelecMix, MLP auxiliary)   80.4 / 79.9 / 84.5   41 s
    (on 2 threads: 81.3 / 80.6 / 87.4; the tests pin 1 thread, tests/conftest.py)
    LfF+SelecMix (base=lff, b=1, a=0.1; 1 thread, not tested here)   79.5 / 78.6 / -
    Official protocol, 5 epochs (1 thread): SelecMix 43.5 / 43.3 (Vanilla 23.2 / 14.8).
    """
    _beats_vanilla("selecmix", vanilla, tmp_path, raw_root, data_root)
