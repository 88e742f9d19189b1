"""A colour-biased variant of another idx-format dataset is a short subclass that names its
source; its folder, build lock, manifest and progress text follow its registered name."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from debias_bench.data.folder_swap import build_lock
from debias_bench.data.spec import DatasetSpec
from debias_bench.datasets.cmnist import ColourBiasedDigits
from debias_bench.datasets.mnist_raw import IdxSource, write_idx
from debias_bench.errors import DataNotFoundError
from debias_bench.registry import DATASETS, register_dataset

FILES = {
    "train_images": "tiny-train-images",
    "train_labels": "tiny-train-labels",
    "test_images": "tiny-test-images",
    "test_labels": "tiny-test-labels",
}
TINY = IdxSource(name="TinyDigits", folders=("tiny_idx",), files=FILES, image_shape=(12, 12))


@pytest.fixture
def tiny_digits():
    """The whole variant: a source and a spec (here registered for the test only)."""

    @register_dataset("tiny_cdigits", display_name="Colored TinyDigits", kind="synthetic")
    class ColoredTinyDigits(ColourBiasedDigits):
        raw_source = TINY
        spec = DatasetSpec(
            name="tiny_cdigits",
            num_classes=10,
            num_biases=10,
            ratios=(1.0, 5.0),
            image_size=(12, 12),
            channels=3,
            backbone="mlp",
            test_kind="unbiased",
        )

    yield ColoredTinyDigits
    DATASETS.unregister("tiny_cdigits")


def write_tiny_idx(raw, per_class=20, test_per_class=5):
    """The fixture source: idx files of 12 x 12 images under <raw>/tiny_idx/."""
    rng = np.random.default_rng(0)
    for split, n in (("train", per_class), ("test", test_per_class)):
        labels = np.repeat(np.arange(10, dtype=np.uint8), n)
        images = rng.integers(0, 256, (len(labels), 12, 12)).astype(np.uint8)
        write_idx(raw / "tiny_idx" / f"{FILES[split + '_images']}.gz", images)
        write_idx(raw / "tiny_idx" / f"{FILES[split + '_labels']}.gz", labels)


def test_the_variant_builds_into_its_own_folder_with_its_own_lock(tiny_digits, tmp_path, capsys):
    raw, data = tmp_path / "raw", tmp_path / "data"
    write_tiny_idx(raw)
    family = tiny_digits(raw, data, valid_size=20)
    with build_lock(family):
        splits = family.load(5.0)
    assert (data / "tiny_cdigits" / ".build.lock").is_file()
    assert family.folder.parent.parent == data / "tiny_cdigits"
    assert not (data / "cmnist").exists() and not (data / "downloads").exists()
    assert "building tiny_cdigits" in capsys.readouterr().err
    manifest = json.loads((family.folder / "manifest.json").read_text())
    assert manifest["params"]["valid_size"] == 20 and family.verify() == []
    assert splits.train.images.shape[1:] == (12, 12, 3)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (180, 20, 50)
    counts = splits.train.counts(10, 10)
    assert int(counts.sum() - counts.diag().sum()) == 10  # 5 % of 18 per class, rounded: 1
    assert family.version().startswith("tiny_cdigits-v1/")


def test_a_registered_subclass_without_its_own_spec_name_still_uses_its_name(tmp_path):
    @register_dataset("tiny_renamed", display_name="Renamed", kind="synthetic")
    class Renamed(ColourBiasedDigits):
        raw_source = TINY
        spec = dataclasses.replace(DATASETS.get("cmnist").spec, image_size=(12, 12), ratios=(5.0,))

    try:
        family = Renamed(tmp_path / "raw", tmp_path / "data")
        assert family.spec.name == "tiny_renamed"
        assert family.folder.parent.parent == tmp_path / "data" / "tiny_renamed"
    finally:
        DATASETS.unregister("tiny_renamed")


def test_a_missing_source_says_where_it_looked(tiny_digits, tmp_path):
    family = tiny_digits(tmp_path / "raw", tmp_path / "data")
    message = family.availability()
    assert message is not None  # no mirror: nothing to fetch by itself
    assert str(tmp_path / "raw" / "tiny_idx") in message
    assert "bench data prepare tiny_cdigits" in message
    with pytest.raises(DataNotFoundError, match="TinyDigits idx files not found"):
        family.load(1.0)
