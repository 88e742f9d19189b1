from __future__ import annotations

import pytest
import torch

from debias_bench.config.run_config import make_config
from debias_bench.errors import BenchError
from debias_bench.launchers.run_one import run_one
from debias_bench.runs.store import RunStore
from debias_bench.training.cam import class_activation_maps
from debias_bench.training.engine import restore_method

CONV = {"steps": 8, "eval_every": 8, "batch_size": 32, "backbone": "resnet20"}


@pytest.fixture
def conv_runs(tmp_path, toy_place):
    store = RunStore(tmp_path / "runs")
    runs = {}
    for method in ("vanilla", "etf_debias"):
        config = make_config(method, "toy", 20, 0, protocol="clean", overrides=CONV)
        assert run_one(config, store, toy_place, torch.device("cpu")).state == "done"
        runs[method] = store.run(config.run_id)
    return runs


@pytest.mark.parametrize("method", ["vanilla", "etf_debias"])
def test_maps_have_the_image_size_and_are_normalised(conv_runs, toy_place, method):
    model, _, _ = restore_method(conv_runs[method], toy_place, torch.device("cpu"))
    x = torch.rand(5, 3, 8, 8)
    maps = class_activation_maps(model, x, torch.tensor([0, 1, 2, 3, 0]))
    assert maps.shape == (5, 8, 8)
    assert maps.min() >= 0 and maps.max() <= 1
    peaks = maps.flatten(1).max(1).values
    assert all(p == pytest.approx(1.0) or p == 0 for p in peaks.tolist())  # 0: no positive evidence
    assert peaks.max() == pytest.approx(1.0)


def test_cam_is_the_class_weighted_feature_map(conv_runs, toy_place):
    model, _, _ = restore_method(conv_runs["vanilla"], toy_place, torch.device("cpu"))
    x = torch.rand(2, 3, 8, 8)
    with torch.no_grad():
        fmap = model.backbone_module().feature_map(x)
        # pooling the unnormalised map gives back the logit (minus the head's bias)
        raw = torch.einsum("c,chw->hw", model.classifier_weight()[1], fmap[0])
        logit = model.predict(x)[0, 1] - model.model.head.bias[1]
    assert raw.mean().item() == pytest.approx(logit.item(), rel=1e-4, abs=1e-5)


def test_mlp_backbone_is_refused(tmp_path, toy_place):
    config = make_config("vanilla", "toy", 20, 0, overrides={"steps": 2, "eval_every": 2})
    store = RunStore(tmp_path)
    run_one(config, store, toy_place, torch.device("cpu"))
    model, _, _ = restore_method(store.run(config.run_id), toy_place, torch.device("cpu"))
    with pytest.raises(BenchError, match="convolutional backbone"):
        class_activation_maps(model, torch.rand(1, 3, 8, 8))


def test_viz_cam_writes_a_grid(conv_runs, tmp_path, monkeypatch, toy_place):
    from debias_bench.cli import main

    monkeypatch.setenv("BENCH_RAW_ROOT", str(toy_place.raw_root))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(toy_place.data_root))
    out = tmp_path / "cam.png"
    assert main(["viz", "cam", str(conv_runs["etf_debias"].path), "--n", "3", "-o", str(out)]) == 0
    assert out.stat().st_size > 5_000
