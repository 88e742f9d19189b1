"""Builders on the real raw data (small subsets): counts, class x bias structure, determinism,
disjointness; LfF npy export/import. Skipped when the raw files are absent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from debias_bench.datasets import lff_npy
from debias_bench.datasets.bar import BAR, CLASS_NAMES
from debias_bench.datasets.cifar10c import CorruptedCIFAR10
from debias_bench.datasets.dogs_and_cats import DogsAndCats
from debias_bench.errors import DataNotFoundError

pytestmark = pytest.mark.realdata


def _need(raw_root: Path, name: str) -> None:
    if not (raw_root / name).exists():
        pytest.skip(f"{name} not found under {raw_root}")


# ------------------------------------------------------------------ Corrupted CIFAR-10
LIMIT = 40  # images per class and split (train and test) for the quick builds


@pytest.fixture(scope="module")
def c10c(raw_root, data_root):
    _need(raw_root, "cifar10-jpeg.tar.gz")
    family = CorruptedCIFAR10(raw_root, data_root, limit=LIMIT, valid_size=40)
    family.prepare()
    return family


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0, 5.0])
def test_cifar10c_train_is_skewed_per_class(c10c, ratio):
    train = c10c.load(ratio).train
    counts = train.counts(10, 10)
    assert train.images.shape[1:] == (32, 32, 3) and train.images.dtype == torch.uint8
    for c in range(10):
        n_c = int(counts[c].sum())
        conflicting = n_c - int(counts[c, c])
        assert conflicting == round(n_c * ratio / 100)
        others = counts[c][torch.arange(10) != c]
        assert int(others.max() - others.min()) <= 1  # spread over the other corruptions


def test_cifar10c_valid_and_test_are_unbiased(c10c):
    splits = c10c.load(1.0)
    test = splits.test.counts(10, 10)
    assert test.sum() == 10 * LIMIT
    assert int(test.max() - test.min()) <= 1  # every (class, corruption) cell alike
    valid = splits.valid.counts(10, 10)
    assert len(splits.valid) == 40
    assert int((valid.max(1).values - valid.min(1).values).max()) <= 1  # uniform within class
    assert len(splits.train) + len(splits.valid) == 10 * LIMIT  # held out of the train set


def test_cifar10c_build_is_deterministic_and_seeded(c10c, raw_root, tmp_path):
    again = CorruptedCIFAR10(raw_root, tmp_path / "a", limit=LIMIT, valid_size=40, n_jobs=1)
    a, b = c10c.load(2.0), again.load(2.0)
    assert torch.equal(a.train.images, b.train.images) and torch.equal(
        a.train.biases, b.train.biases
    )
    assert torch.equal(a.test.images, b.test.images)
    other = CorruptedCIFAR10(raw_root, tmp_path / "b", limit=LIMIT, valid_size=40, data_seed=1)
    assert not torch.equal(other.load(2.0).train.biases, a.train.biases)


def test_cifar10c_aligned_images_are_shared_across_ratios(c10c):
    low, high = c10c.load(0.5).train, c10c.load(5.0).train
    assert torch.equal(low.labels, high.labels)  # same rows, same order
    same = low.biases == high.biases
    assert torch.equal(low.images[same], high.images[same])
    differ = ~same
    assert differ.any() and not torch.equal(low.images[differ], high.images[differ])


def test_cifar10c_verify_and_version(c10c):
    assert c10c.verify() == []
    assert "default-level5" in c10c.version()
    assert c10c.spec.bias_names[5] == "gaussian_blur"


def test_cifar10c_type1_variant_names_its_biases(raw_root, tmp_path):
    _need(raw_root, "cifar10-jpeg.tar.gz")
    family = CorruptedCIFAR10(raw_root, tmp_path, corruptions="type1", severity=2, limit=3)
    assert family.spec.bias_names[-1] == "original" and "type1-level2" in family.tag
    splits = family.load(5.0)
    assert len(splits.test) == 30


def test_lff_npy_export_import_round_trip(c10c, tmp_path):
    folder = lff_npy.export_lff(c10c, 1.0, tmp_path / "lff")
    assert folder.name == "CorruptedCIFAR10-Default-Skewed0.01-Severity4"  # level 5
    assert np.load(folder / "train" / "attrs.npy").dtype == np.uint8
    imported_family = CorruptedCIFAR10(c10c.raw_root, tmp_path / "data", source="lff")
    with pytest.raises(DataNotFoundError, match="bench data import cifar10c"):
        imported_family.load(1.0)
    lff_npy.import_lff(imported_family, folder, 1.0)
    got, want = imported_family.load(1.0), c10c.load(1.0)
    assert torch.equal(got.train.images, want.train.images)
    assert torch.equal(got.train.biases, want.train.biases)
    assert torch.equal(got.test.images, want.test.images)
    assert torch.equal(got.valid.labels, want.test.labels)  # LfF has no validation split


# ------------------------------------------------------------------ Dogs & Cats
def test_dogs_and_cats_release_protocol_counts(raw_root, data_root):
    _need(raw_root, "dogs-and-cats-128.tar")
    family = DogsAndCats(raw_root, data_root)
    recs = family.release_records()
    groups = {}
    for r in recs:
        groups[(r.label, r.bias)] = groups.get((r.label, r.bias), 0) + 1
    # aligned: dark cats (0, 0) + bright dogs (1, 1); conflicting: bright cats + dark dogs
    assert groups == {(0, 0): 4748, (1, 1): 5299, (0, 1): 3086, (1, 0): 3652}
    plan = family.plan(recs)
    train5, train1 = plan["5pct/train"], plan["1pct/train"]
    assert sum(r.label != r.bias for r in train5) == 250 + 279
    assert sum(r.label != r.bias for r in train1) == 48 + 54
    assert {r.path for r in train1} <= {r.path for r in train5}  # 1 % inside 5 %
    for split in ("valid", "test"):
        assert all(r.label != r.bias for r in plan[split])  # conflicting only
    held = {r.path for r in plan["valid"]} | {r.path for r in plan["test"]}
    assert not held & {r.path for r in train5}  # disjoint from training
    assert len(plan["valid"]) + len(plan["test"]) + 529 == 6738
    again = DogsAndCats(raw_root, data_root).plan(recs)
    assert [r.path for r in again["test"]] == [r.path for r in plan["test"]]
    other = DogsAndCats(raw_root, data_root, data_seed=1).plan(recs)
    assert [r.path for r in other["test"]] != [r.path for r in plan["test"]]


def test_dogs_and_cats_small_build(raw_root, data_root):
    _need(raw_root, "dogs-and-cats-128.tar")
    family = DogsAndCats(raw_root, data_root, limit_per_group=40)
    splits = family.load(5.0)
    assert splits.train.counts(2, 2).tolist() == [[40, 2], [2, 40]]
    assert splits.test.counts(2, 2)[0, 0] == 0 and splits.test.counts(2, 2)[1, 1] == 0
    assert splits.train.images.shape[1:] == (224, 224, 3)
    assert family.verify() == []


# ------------------------------------------------------------------ BAR
def test_bar_release_protocol_counts(raw_root, data_root):
    _need(raw_root, "bar.tar")
    family = BAR(raw_root, data_root)
    aligned, conflict = family.release_records()
    assert len(aligned) == 1941 and len(conflict) == 654
    per_class = np.bincount([r.label for r in aligned], minlength=6).tolist()
    assert per_class == [326, 520, 163, 279, 336, 317]  # paper order: ..., Vaulting, Racing, ...
    assert CLASS_NAMES[3] == "Vaulting"
    plan = family.plan(aligned, conflict)
    for ratio, total in (("1pct", 19), ("5pct", 103)):
        train = plan[f"{ratio}/train"]
        moved = [r for r in train if r.label != r.bias]
        assert len(train) - len(moved) == 1941 and len(moved) == total
        assert all(r.bias == (r.label + 1) % 6 for r in moved)  # BiasEnsemble's convention
    assert len(plan["valid"]) + len(plan["test"]) == 654 - 103
    held = {r.path for r in plan["valid"]} | {r.path for r in plan["test"]}
    assert not held & {r.path for r in plan["5pct/train"]}


def test_bar_small_build(raw_root, data_root):
    _need(raw_root, "bar.tar")
    family = BAR(raw_root, data_root, limit_per_class=20)
    splits = family.load(5.0)
    counts = splits.train.counts(6, 6)
    assert counts.diag().tolist() == [20] * 6 and int(counts.sum()) == 6 * 21
    assert (splits.test.labels != splits.test.biases).all()
    assert isinstance(splits.test.images, np.memmap)
    assert family.verify() == []
