"""ETF-Debias measurably debiases on real Colored MNIST at 1 % bias-conflicting samples."""

from __future__ import annotations

import pytest
import torch

from debias_bench.config.run_config import make_config
from debias_bench.paths import DataPlace
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run

pytestmark = pytest.mark.realdata


def _test_accuracy(method, protocol, epochs, tmp_path, raw_root, data_root):
    config = make_config(method, "cmnist", 1.0, 0, protocol=protocol, preset="quick", epochs=epochs)
    run_dir = RunStore(tmp_path).run(config.run_id)
    result = train_run(config, run_dir, DataPlace(raw_root, data_root), torch.device("cpu"))
    return result["selections"]["last"]["test"]


def test_etf_debias_beats_vanilla_clean_protocol(tmp_path, raw_root, data_root):
    """Measured (2 CPU cores, seed 0, 5 epochs, clean protocol, about 6 s per run):
    unbiased test accuracy Vanilla 54.2, ETF-Debias 78.6; bias-conflicting 49.2 vs 76.6."""
    vanilla = _test_accuracy("vanilla", "clean", 5, tmp_path, raw_root, data_root)
    etf = _test_accuracy("etf_debias", "clean", 5, tmp_path, raw_root, data_root)
    assert etf["accuracy"] > vanilla["accuracy"] + 12
    assert etf["conflicting_accuracy"] > vanilla["conflicting_accuracy"] + 12
    assert etf["aligned_accuracy"] > 90


@pytest.mark.slow
def test_etf_debias_beats_vanilla_official_protocol(tmp_path, raw_root, data_root):
    """The official protocol (inputs divided by 255 twice, growing lr) learns more slowly.
    Measured (seed 0, 12 epochs, about 15 s per run): Vanilla 28.5, ETF-Debias 59.3 (at 20
    epochs 34.5 and 57.8; at 9, 26.9 and 46.5)."""
    vanilla = _test_accuracy("vanilla", "official", 12, tmp_path, raw_root, data_root)
    etf = _test_accuracy("etf_debias", "official", 12, tmp_path, raw_root, data_root)
    assert etf["accuracy"] > vanilla["accuracy"] + 12
