"""GroupDRO, JTT and PGD measurably debias on real Colored MNIST at 1 % bias-conflicting samples.

Each method is compared with Vanilla trained with the same protocol (clean) and length (10
epochs of the quick preset), seed 0, on the bias-conflicting samples of the unbiased test set
(issue 25's acceptance: at least 5 points above Vanilla). Hyperparameters are the YAML defaults:
GroupDRO's official eta 0.01 and C 0; JTT's T 2 and lambda_up 100 and PGD's optimiser recipe
chosen on the validation split (jtt.yaml, pgd.yaml); PGD's biased model as long as the run and
its norm's p 0.7; each method's official sampling (group-balanced, duplicated, resampled).
"""

from __future__ import annotations

import pytest
import torch

from debias_bench.config.run_config import make_config
from debias_bench.paths import DataPlace
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run

pytestmark = pytest.mark.realdata

EPOCHS = 10


def _test_metrics(method, tmp_path, raw_root, data_root):
    config = make_config(method, "cmnist", 1.0, 0, protocol="clean", preset="quick", epochs=EPOCHS)
    run_dir = RunStore(tmp_path).run(config.run_id)
    result = train_run(config, run_dir, DataPlace(raw_root, data_root), torch.device("cpu"))
    assert result["epochs"] == pytest.approx(EPOCHS)
    test = result["selections"]["last"]["test"]
    keys = ("accuracy", "conflicting_accuracy", "aligned_accuracy")
    times = f"{result['train_time_s']:.0f} s (preparation {result['prepare_time_s']:.0f} s)"
    print(method, " / ".join(f"{test[k]:.1f}" for k in keys), times)
    return test


@pytest.fixture(scope="module")
def vanilla(tmp_path_factory, raw_root, data_root):
    """Measured (1 thread): unbiased 61.5, bias-conflicting 57.2, aligned 99.8."""
    return _test_metrics("vanilla", tmp_path_factory.mktemp("vanilla"), raw_root, data_root)


def _beats_vanilla(method, vanilla, tmp_path, raw_root, data_root):
    ours = _test_metrics(method, tmp_path, raw_root, data_root)
    assert ours["conflicting_accuracy"] > vanilla["conflicting_accuracy"] + 5, (ours, vanilla)
    assert ours["accuracy"] > vanilla["accuracy"] + 4
    assert ours["aligned_accuracy"] > 75  # debiasing, not just a different failure


@pytest.mark.slow
@pytest.mark.parametrize("method", ["groupdro", "jtt", "pgd"])
def test_beats_vanilla_on_bias_conflicting_samples(method, vanilla, tmp_path, raw_root, data_root):
    """Measured (seed 0; test accuracy, unbiased / conflicting / aligned; training time of one
    run, of which the preparation stage; 1 thread, as tests/conftest.py pins it; 2 CPU cores
    shared with other jobs), each method with its official sampling (the default; issue 38):

    Vanilla   60.4 / 56.1 / 99.7    53 s
    GroupDRO  77.4 / 75.0 / 98.7    69 s (group-balanced batches)
    JTT       72.8 / 69.8 / 99.6    83 s (duplicated error set; identification model: 16 s)
    PGD       80.0 / 80.2 / 78.3    44 s (resampled, p 0.7; biased model and scores: 23 s)

    The same numbers as ``bench run ... --preset quick --epochs 10 --protocol clean --threads 1``
    gives for seed 0 (docs/methods-sampling.md, seeds 0-2 and the ``loss_weights`` variants).
    PGD trades aligned accuracy for conflicting accuracy: its resampling puts most of the
    training batches on the few high-gradient samples (pgd.py).
    """
    _beats_vanilla(method, vanilla, tmp_path, raw_root, data_root)
