from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from debias_bench.datasets.cmnist import MEAN_COLORS, ColoredMNIST, colorize
from debias_bench.datasets.mnist_raw import read_idx
from debias_bench.datasets.skew import assign_skewed, assign_uniform
from debias_bench.errors import ConfigError, CorruptDataError, DataNotFoundError

RATIOS = (0.5, 1.0, 2.0, 5.0)


# ------------------------------------------------------------------ pure functions, no data
@pytest.mark.parametrize("pct", RATIOS)
def test_assign_skewed_counts(pct):
    labels = np.repeat(np.arange(10), [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949])
    biases = assign_skewed(labels, pct, 10, np.random.default_rng(0))
    for c in range(10):
        b = biases[labels == c]
        n_conflict = round(len(b) * pct / 100)
        assert (b != c).sum() == n_conflict
        per_other = np.bincount(b[b != c], minlength=10)[[x for x in range(10) if x != c]]
        assert per_other.max() - per_other.min() <= 1


def test_assign_uniform_is_balanced_per_class():
    labels = np.repeat(np.arange(10), 1003)
    biases = assign_uniform(labels, 10, np.random.default_rng(0))
    for c in range(10):
        counts = np.bincount(biases[labels == c], minlength=10)
        assert counts.max() - counts.min() <= 1


def test_colorize_colours_the_foreground_with_the_mean_colour():
    digits = np.zeros((10, 28, 28), dtype=np.uint8)
    digits[:, 10:18, 10:18] = 255
    biases = np.arange(10)
    images = colorize(digits, biases, severity=4, rng=np.random.default_rng(0))
    assert images.shape == (10, 28, 28, 3) and images.dtype == np.uint8
    assert images[:, 0, 0].max() == 0  # black background
    colour = images[:, 12, 12].astype(float) / 255
    assert np.abs(colour - MEAN_COLORS).max() < 0.005 * 5 + 1 / 255  # noise std 0.005


def test_read_idx_rejects_a_corrupt_file(tmp_path):
    bad = tmp_path / "train-images-idx3-ubyte.gz"
    with gzip.open(bad, "wb") as f:
        f.write(b"\x00\x00\x08\x03" + (60000).to_bytes(4, "big") + b"\x00" * 20)
    with pytest.raises(CorruptDataError, match=str(bad)):
        read_idx(bad)
    garbage = tmp_path / "x.gz"
    garbage.write_bytes(b"not gzip")
    with pytest.raises(CorruptDataError, match=r"x\.gz"):
        read_idx(garbage)


def test_missing_raw_data_says_where_it_looked(tmp_path, monkeypatch):
    offline = dataclasses.replace(ColoredMNIST.raw_source, mirrors=("http://127.0.0.1:9/",))
    monkeypatch.setattr(ColoredMNIST, "raw_source", offline)
    family = ColoredMNIST(tmp_path / "raw", tmp_path / "data")
    with pytest.raises(DataNotFoundError) as err:
        family.load(1.0)
    text = str(err.value)
    assert str(tmp_path / "raw" / "mnist") in text and "bench data prepare cmnist" in text
    assert "download failed" in text


def test_unknown_ratio_lists_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"valid ratios: 0\.5, 1, 2, 5"):
        ColoredMNIST(tmp_path, tmp_path).load(3.0)


# ------------------------------------------------------------------ real MNIST
@pytest.fixture(scope="module")
def cmnist(raw_root, data_root):
    return ColoredMNIST(raw_root, data_root)


@pytest.mark.realdata
@pytest.mark.parametrize("pct", RATIOS)
def test_train_counts_per_class_and_bias(cmnist, pct):
    train = cmnist.load(pct).train
    counts = train.counts(10, 10).numpy()
    assert counts.sum() == 54000
    for c in range(10):
        n_c = counts[c].sum()
        assert counts[c].sum() - counts[c, c] == round(n_c * pct / 100)
        others = np.delete(counts[c], c)
        assert others.max() - others.min() <= 1


@pytest.mark.realdata
def test_valid_and_test_are_unbiased_and_disjoint(cmnist):
    splits = cmnist.load(1.0)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (54000, 6000, 10000)
    for split in (splits.valid, splits.test):
        counts = split.counts(10, 10).numpy()
        assert (counts.max(1) - counts.min(1)).max() <= 1
    # valid comes from the MNIST training images, none of them reused by train
    grey = lambda s: s.images.numpy().max(axis=3).reshape(len(s), -1)  # noqa: E731
    train_keys = {row.tobytes() for row in (grey(splits.train) > 0)}
    valid_keys = [row.tobytes() for row in (grey(splits.valid) > 0)]
    test_keys = {row.tobytes() for row in (grey(splits.test) > 0)}
    assert sum(k in train_keys for k in valid_keys) < 20  # only genuine MNIST duplicates
    assert sum(k in test_keys for k in valid_keys) < 20


@pytest.mark.realdata
def test_aligned_samples_carry_their_class_colour(cmnist):
    train = cmnist.load(1.0).train
    images, labels = train.images.numpy()[:2000], train.labels.numpy()[:2000]
    aligned = train.aligned.numpy()[:2000]
    brightest = images.reshape(2000, -1, 3)[
        np.arange(2000), images.max(3).reshape(2000, -1).argmax(1)
    ]
    colour = brightest / brightest.max(1, keepdims=True)
    expected = MEAN_COLORS[labels] / MEAN_COLORS[labels].max(1, keepdims=True)
    assert np.abs(colour - expected)[aligned].max() < 0.06


@pytest.mark.realdata
def test_build_is_deterministic_and_depends_only_on_data_seed(raw_root, data_root, tmp_path):
    again = ColoredMNIST(raw_root, tmp_path / "again").load(0.5).train
    first = ColoredMNIST(raw_root, data_root).load(0.5).train
    assert np.array_equal(first.images.numpy(), again.images.numpy())
    assert np.array_equal(first.biases.numpy(), again.biases.numpy())
    other = ColoredMNIST(raw_root, tmp_path / "other", data_seed=1).load(0.5).train
    assert not np.array_equal(first.biases.numpy(), other.biases.numpy())


@pytest.mark.realdata
def test_raw_root_is_never_written_and_data_is_uint8_in_memory(cmnist, raw_root):
    before = sorted(p.name for p in raw_root.rglob("*"))
    splits = cmnist.load(2.0)
    assert splits.train.images.dtype.__str__() == "torch.uint8"
    assert sorted(p.name for p in raw_root.rglob("*")) == before


@pytest.mark.realdata
def test_truncated_prepared_file_is_named(raw_root, tmp_path):
    family = ColoredMNIST(raw_root, tmp_path)
    folder = family.prepare([1.0])
    target = folder / "1pct" / "train" / "images.npy"
    target.write_bytes(target.read_bytes()[:1000])
    with pytest.raises(CorruptDataError, match="1pct/train"):
        family.load(1.0)
    shutil.rmtree(folder)
    assert Path(family.prepare([1.0])).is_dir()
