"""PGD's ``train_augment: release``: the release's Colored MNIST transforms (``sumyeongahn/PGD``
``trainer/module/data.py``: RandomResizedCrop(28, scale 0.9-1.1), ColorJitter(hue 0.05,
saturation 0.05), RandomRotation(+-10, nearest)) on both stages' training batches, against
torchvision's functions, and what stays as it was without it (run ids, checkpoint keys)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from support.methods_helpers import CPU, assert_resumes_to_whole, toy_batch, whole_and_stopped

from debias_bench.config.run_config import make_config, resolve_hparams
from debias_bench.methods import pgd as pgd_module
from debias_bench.methods.pgd import (
    PGD,
    crop_boxes,
    hsv_to_rgb,
    release_augment,
    resized_crop,
    rgb_to_hsv,
    rotate_nearest,
    scale_saturation,
    shift_hue,
)
from debias_bench.registry import DATASETS
from debias_bench.streams import generator
from debias_bench.training.method import TrainEnv

RELEASE = {"train_augment": "release"}


def _images(n: int = 12, side: int = 28, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 3, side, side, generator=torch.Generator().manual_seed(seed))


def test_colour_steps_match_torchvision():
    tf = pytest.importorskip("torchvision.transforms.functional")
    x = _images()
    torch.testing.assert_close(hsv_to_rgb(rgb_to_hsv(x)), x, atol=1e-5, rtol=0)
    shifts = torch.linspace(-0.05, 0.05, len(x))
    factors = torch.linspace(0.95, 1.05, len(x))
    hue_ref = torch.stack([tf.adjust_hue(img, float(h)) for img, h in zip(x, shifts, strict=True)])
    sat_ref = torch.stack(
        [tf.adjust_saturation(img, float(f)) for img, f in zip(x, factors, strict=True)]
    )
    torch.testing.assert_close(shift_hue(x, shifts), hue_ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(scale_saturation(x, factors), sat_ref, atol=1e-5, rtol=0)


def test_geometric_steps_match_torchvision():
    tf = pytest.importorskip("torchvision.transforms.functional")
    x = _images()
    boxes = crop_boxes(len(x), 28, 28, torch.Generator().manual_seed(1))
    crop_ref = torch.stack(
        [
            tf.resized_crop(img, *[int(v) for v in box], [28, 28], antialias=False)
            for img, box in zip(x, boxes, strict=True)
        ]
    )
    torch.testing.assert_close(resized_crop(x, boxes), crop_ref, atol=1e-5, rtol=0)
    angles = torch.linspace(-10, 10, len(x))
    nearest = tf.InterpolationMode.NEAREST
    rot_ref = torch.stack(
        [tf.rotate(img, float(a), interpolation=nearest) for img, a in zip(x, angles, strict=True)]
    )
    assert torch.equal(rotate_nearest(x, angles), rot_ref)


def test_crop_boxes_fit_the_image_with_the_releases_scale():
    boxes = crop_boxes(20_000, 28, 28, torch.Generator().manual_seed(0))
    top, left, height, width = boxes.unbind(1)
    assert (top >= 0).all() and (left >= 0).all()
    assert (top + height <= 28).all() and (left + width <= 28).all()
    area = height * width / 784
    assert area.min() >= 0.85 and area.max() <= 1.0  # 0.9 h w, rounded sides; >1 never fits
    ratio = width / height
    assert ratio.min() >= 3 / 4 - 0.05 and ratio.max() <= 4 / 3 + 0.05
    assert 0.2 < float((area == 1).float().mean()) < 0.4  # whole image: tries that failed


def test_release_augment_is_a_pure_function_of_its_draws():
    x = _images()
    one = release_augment(x, torch.Generator().manual_seed(5))
    again = release_augment(x, torch.Generator().manual_seed(5))
    other = release_augment(x, torch.Generator().manual_seed(6))
    assert torch.equal(one, again) and not torch.equal(one, other)
    assert one.shape == x.shape and one.min() >= 0 and one.max() <= 1


def test_the_option_is_off_by_default_and_leaves_run_ids_and_checkpoints_as_they_were():
    for protocol in ("official", "clean"):
        assert resolve_hparams("pgd", "cmnist", protocol=protocol)["train_augment"] == "none"
    plain = make_config("pgd", "cmnist", 1, 0)
    named = make_config("pgd", "cmnist", 1, 0, overrides={"train_augment": "none"})
    augmented = make_config("pgd", "cmnist", 1, 0, overrides=RELEASE)
    assert "train_augment" not in plain.identity()["hparams"]
    assert plain.run_id == named.run_id != augmented.run_id
    spec = DATASETS.get("toy").spec
    hp = resolve_hparams("pgd", "toy", protocol="clean")
    env = TrainEnv(CPU, 512, 16, 40, 0)
    assert "augmented_steps" not in PGD(spec, hp, env).state_dict()
    assert "augmented_steps" in PGD(spec, {**hp, **RELEASE}, env).state_dict()


def test_skipped_where_the_release_defines_no_augmentation():
    for name in ("cifar10c", "bffhq", "dogs_and_cats", "bar"):
        reason = PGD.skip(DATASETS.get(name).spec, RELEASE)
        assert reason and "Colored MNIST" in reason
        assert PGD.skip(DATASETS.get(name).spec, {"train_augment": "none"}) is None
    assert PGD.skip(DATASETS.get("cmnist").spec, RELEASE) is None


def test_update_trains_on_the_augmented_batch_of_its_step():
    spec = DATASETS.get("toy").spec
    hp = {**resolve_hparams("pgd", "toy", protocol="clean"), **RELEASE}
    hp.update(optimizer="sgd", lr=1.0, momentum=0.0, weight_decay=0.0)
    torch.manual_seed(0)
    method = PGD(spec, hp, TrainEnv(CPU, 512, 16, 40, seed=3))
    batch = toy_batch(spec, n=8)
    for step in range(2):
        seen = release_augment(batch.x, generator(3, "pgd.augment", 1, step))
        expected = F.cross_entropy(method.model(seen), batch.y).item()
        got = method.update(batch)["ce"].item()
        assert math.isclose(got, expected, rel_tol=1e-5)
    assert method.augmented_steps.value == 2


def test_the_biased_model_trains_on_augmented_batches(monkeypatch):
    spec = DATASETS.get("toy").spec
    hp = {**resolve_hparams("pgd", "toy", protocol="clean"), **RELEASE}
    torch.manual_seed(0)
    method = PGD(spec, hp, TrainEnv(CPU, 512, 16, 40, seed=0))
    seen = []

    def fake_train(model, optimizer, batches, steps, loss_fn, scheduler=None):
        seen.extend(next(batches) for _ in range(2))
        return model

    monkeypatch.setattr(pgd_module, "train_model", fake_train)
    plain = []
    real = pgd_module.TrainStream.batches

    def recording(self, start_step=0):
        for batch in real(self, start_step):
            plain.append(batch)
            yield batch

    monkeypatch.setattr(pgd_module.TrainStream, "batches", recording)
    method.prepare(DATASETS.get("toy")("/nonexistent", "/nonexistent").load(20))
    for k, (raw, got) in enumerate(zip(plain, seen, strict=True)):
        expected = release_augment(raw.x, generator(0, "pgd.augment", 0, k))
        assert torch.equal(got.x, expected) and torch.equal(got.y, raw.y)


def test_augmented_run_stopped_and_resumed_equals_uninterrupted(tmp_path, toy_place):
    overrides = {"steps": 24, "eval_every": 8, "batch_size": 32, "bias_epochs": 0.5, **RELEASE}
    config = make_config("pgd", "toy", 20, 0, protocol="clean", overrides=overrides)
    whole, whole_dir, stopped = whole_and_stopped(config, tmp_path, toy_place, stop_at=13)
    assert stopped.load_checkpoint()["method"]["augmented_steps"]["value"] > 0
    assert_resumes_to_whole(config, toy_place, stopped, whole, whole_dir)
