from __future__ import annotations

import numpy as np
import pytest
import torch

from debias_bench.methods.etf_debias import simplex_etf
from debias_bench.training.nc import neural_collapse, neural_collapse_by_alignment


def _numpy_nc(feats, labels, w):
    """Direct NumPy transcription of the paper's metric table."""
    classes = np.unique(labels)
    k = len(classes)
    mu = np.stack([feats[labels == c].mean(0) for c in classes])
    zg = feats.mean(0)
    sw = sum(np.cov(feats[labels == c].T, bias=True) for c in classes) / k
    sb = (mu - zg).T @ (mu - zg) / k
    target = (np.eye(k) - np.ones((k, k)) / k) / np.sqrt(k - 1)
    ww = w @ w.T
    wz = w @ (mu - zg).T
    return (
        np.trace(sw @ np.linalg.pinv(sb)) / k,
        np.linalg.norm(ww / np.linalg.norm(ww) - target),
        np.linalg.norm(wz / np.linalg.norm(wz) - target),
    )


def test_matches_a_direct_numpy_computation():
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(300, 20))
    labels = np.arange(300) % 5
    w = rng.normal(size=(5, 20))
    ours = neural_collapse(torch.tensor(feats), torch.tensor(labels), torch.tensor(w))
    expected = _numpy_nc(feats, labels, w)
    assert [ours["nc1"], ours["nc2"], ours["nc3"]] == pytest.approx(expected, rel=1e-8)


def test_zero_at_perfect_collapse_and_positive_for_random_features():
    k, d = 10, 32
    means = simplex_etf(d, k, torch.Generator().manual_seed(1)).T.double() * 3.0  # K x d
    labels = torch.arange(500) % k
    collapsed = means[labels]
    perfect = neural_collapse(collapsed, labels, means.clone())
    assert perfect["nc1"] == pytest.approx(0, abs=1e-10)
    assert perfect["nc2"] == pytest.approx(0, abs=1e-6)
    assert perfect["nc3"] == pytest.approx(0, abs=1e-6)

    g = torch.Generator().manual_seed(2)
    noisy = neural_collapse(
        torch.randn(500, d, generator=g), labels, torch.randn(k, d, generator=g)
    )
    assert noisy["nc1"] > 1 and noisy["nc2"] > 0.3 and noisy["nc3"] > 0.3


def test_split_by_alignment_uses_the_present_classes():
    labels = torch.arange(200) % 4
    biases = labels.clone()
    biases[:8] = (labels[:8] + 1) % 4  # two conflicting samples per class
    feats = torch.randn(200, 6, generator=torch.Generator().manual_seed(0))
    out = neural_collapse_by_alignment(feats, labels, biases, torch.randn(4, 6))
    assert set(out) == {"all", "aligned", "conflicting"}
    assert all(v is not None for v in out["conflicting"].values())
    one_class = neural_collapse(feats[:5], torch.zeros(5, dtype=torch.long))
    assert one_class == {"nc1": None, "nc2": None, "nc3": None}


def test_tracked_during_training_and_stored_in_metrics(tmp_path, toy_place):
    from debias_bench.config.run_config import make_config
    from debias_bench.runs.store import RunStore
    from debias_bench.training.engine import train_run

    config = make_config(
        "etf_debias",
        "toy",
        20,
        0,
        protocol="clean",
        overrides={"steps": 16, "eval_every": 8, "batch_size": 32, "track_nc": True},
    )
    run_dir = RunStore(tmp_path).run(config.run_id)
    train_run(config, run_dir, toy_place, torch.device("cpu"))
    records = run_dir.metrics()
    assert len(records) == 2
    for record in records:
        assert set(record["nc"]) == {"all", "aligned", "conflicting"}
        assert all(record["nc"]["all"][m] > 0 for m in ("nc1", "nc2", "nc3"))


def test_analyze_nc_plots_figure_two(tmp_path, toy_place):
    from debias_bench.cli import main
    from debias_bench.config.run_config import make_config
    from debias_bench.runs.store import RunStore
    from debias_bench.training.engine import train_run

    store = RunStore(tmp_path / "runs")
    for method in ("vanilla", "etf_debias"):
        config = make_config(
            method,
            "toy",
            20,
            0,
            protocol="clean",
            overrides={"steps": 16, "eval_every": 8, "batch_size": 32, "track_nc": True},
        )
        run_dir = store.run(config.run_id)
        train_run(config, run_dir, toy_place, torch.device("cpu"))
    out = tmp_path / "fig" / "nc.png"
    assert (
        main(["analyze", "nc", "--out", str(store.root), "--dataset", "toy", "-o", str(out)]) == 0
    )
    assert out.stat().st_size > 10_000 and out.with_suffix(".pdf").is_file()
