"""Readers of the published folder layouts, on small fixtures generated in those layouts."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from debias_bench.cli import main
from debias_bench.datasets.bar import BAR
from debias_bench.datasets.bffhq import BiasedFFHQ, write_fixture
from debias_bench.datasets.dogs_and_cats import DogsAndCats
from debias_bench.datasets.folder_layout import parse_name
from debias_bench.errors import ConfigError, CorruptDataError, DataNotFoundError


def _png(path: Path, label: int, seed: int, size: int = 24) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
    img[:, :, label % 3] = 200
    Image.fromarray(img).save(path)


class Counter:
    def __init__(self) -> None:
        self.k = 0

    def write(self, folder: Path, label: int, bias: int, ext: str = "png") -> None:
        _png(folder / f"{self.k}_{label}_{bias}.{ext}", label, self.k)
        self.k += 1


# ------------------------------------------------------------------ BFFHQ (published layout)
@pytest.fixture
def bffhq_raw(tmp_path: Path) -> Path:
    write_fixture(tmp_path / "raw" / "bffhq", aligned_per_class=10, eval_per_group=3)
    return tmp_path / "raw"


def test_bffhq_reader_counts_and_conflicting_test(bffhq_raw, tmp_path):
    family = BiasedFFHQ(bffhq_raw, tmp_path / "data")
    splits = family.load(5.0)
    n_conflict = round(10 * 5 / 95)  # per class, as the fixture writes it
    assert splits.train.counts(2, 2).tolist() == [[10, n_conflict], [n_conflict, 10]]
    assert splits.valid.counts(2, 2).tolist() == [[3, 3], [3, 3]]  # valid as published
    assert splits.test.counts(2, 2).tolist() == [[0, 3], [3, 0]]  # conflicting only
    assert splits.train.images.shape[1:] == (224, 224, 3)  # decoded once at 224
    assert isinstance(splits.train.images, np.memmap)
    assert family.verify() == []
    assert family.source_kind() == "release"


def test_bffhq_missing_ratio_and_missing_data(bffhq_raw, tmp_path):
    shutil.rmtree(bffhq_raw / "bffhq" / "2pct")
    family = BiasedFFHQ(bffhq_raw, tmp_path / "data")
    present = r"no 2pct folder; ratios present: 0\.5pct, 1pct, 5pct"
    with pytest.raises(DataNotFoundError, match=present):
        family.load(2.0)
    with pytest.raises(ConfigError, match="valid ratios"):
        family.load(3.0)
    empty = BiasedFFHQ(tmp_path / "nothing", tmp_path / "data2")
    with pytest.raises(DataNotFoundError) as err:
        empty.load(0.5)
    assert str(tmp_path / "nothing" / "bffhq") in str(err.value)
    assert "bench data fixture bffhq" in str(err.value)


def test_bffhq_missing_class_folder(bffhq_raw, tmp_path):
    shutil.rmtree(bffhq_raw / "bffhq" / "1pct" / "conflict" / "1")
    with pytest.raises(CorruptDataError, match=r"class folder\(s\) missing: .*1pct/conflict/1"):
        BiasedFFHQ(bffhq_raw, tmp_path / "data").prepare()


def test_corrupt_image_is_named(bffhq_raw, tmp_path):
    bad = bffhq_raw / "bffhq" / "test" / "999_0_1.png"
    bad.write_bytes(b"this is not a png")
    with pytest.raises(CorruptDataError, match=r"999_0_1\.png"):
        BiasedFFHQ(bffhq_raw, tmp_path / "data").prepare()


def test_badly_named_file_is_named(tmp_path):
    with pytest.raises(CorruptDataError, match=r"photo\.png"):
        parse_name(tmp_path / "photo.png")
    assert parse_name(Path("a/b/12_1_0.png")) == (1, 0)


def test_bffhq_fixture_in_data_root_is_a_fallback(tmp_path):
    data = tmp_path / "data"
    assert main(["data", "fixture", "bffhq", "--data-root", str(data), "--per-class", "8"]) == 0
    family = BiasedFFHQ(tmp_path / "raw", data)
    assert family.source_kind() == "fixture"
    assert len(family.load(0.5).test) == 6  # 2 conflicting (label, bias) groups x 3


def test_verify_fails_on_a_tampered_dataset(bffhq_raw, tmp_path, capsys):
    data = tmp_path / "data"
    family = BiasedFFHQ(bffhq_raw, data)
    family.prepare()
    args = ["data", "verify", "bffhq", "--raw-root", str(bffhq_raw), "--data-root", str(data)]
    assert main(args) == 0
    assert "young" in capsys.readouterr().out  # the count table names the classes
    attrs = family.folder / "test" / "attrs.npy"
    a = np.load(attrs)
    a[0, 1] = a[0, 0]  # relabel one conflicting test image as aligned
    np.save(attrs, a)
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "does not match its checksum" in err and "counts is" in err


# ------------------------------------------------------------------ BiasEnsemble layouts
def _dogs_and_cats_layout(root: Path, per_class: int = 6) -> Path:
    c = Counter()
    base = root / "dogs_and_cats"
    for pct in ("1pct", "5pct"):
        for label in (0, 1):
            for _ in range(per_class):
                c.write(base / pct / "align" / str(label), label, label, "jpg")
            c.write(base / pct / "conflict" / str(label), label, 1 - label, "jpg")
        for label in (0, 1):
            for _ in range(2):
                c.write(base / pct / "valid", label, 1 - label, "jpg")
    for label in (0, 1):
        for _ in range(3):
            c.write(base / "test" / str(label), label, 1 - label, "jpg")
    return root


def test_dogs_and_cats_biasensemble_reader(tmp_path):
    raw = _dogs_and_cats_layout(tmp_path / "raw")
    family = DogsAndCats(raw, tmp_path / "data")
    assert family.source_kind() == "biasensemble"
    splits = family.load(1.0)
    assert splits.train.counts(2, 2).tolist() == [[6, 1], [1, 6]]
    assert splits.valid.counts(2, 2).tolist() == [[0, 2], [2, 0]]
    assert splits.test.counts(2, 2).tolist() == [[0, 3], [3, 0]]
    assert family.verify() == []


def test_dogs_and_cats_reader_missing_ratio(tmp_path):
    raw = _dogs_and_cats_layout(tmp_path / "raw")
    shutil.rmtree(raw / "dogs_and_cats" / "5pct")
    with pytest.raises(DataNotFoundError, match=r"no folder for ratio 5%.*ratios present: 1pct"):
        DogsAndCats(raw, tmp_path / "data").prepare()


def _bar_layout(root: Path, per_class: int = 3) -> Path:
    c = Counter()
    base = root / "bar"
    names = ["climbing", "diving", "fishing", "vaulting", "racing", "throwing"]
    for label, name in enumerate(names):
        for _ in range(per_class):
            # the bias written in the name is ignored for training (BiasEnsemble overwrites it)
            c.write(base / "train" / "align" / name, label, 0)
        for pct, n in (("1pct", 1), ("5pct", 2)):
            for _ in range(n):
                c.write(base / "train" / "conflict" / pct / name, label, 0)
        for split in ("valid", "test"):
            c.write(base / split / name, label, (label + 1) % 6)
    return root


def test_bar_biasensemble_reader_uses_the_synthetic_bias_convention(tmp_path):
    raw = _bar_layout(tmp_path / "raw")
    family = BAR(raw, tmp_path / "data")
    assert family.source_kind() == "biasensemble"
    splits = family.load(5.0)
    counts = splits.train.counts(6, 6)
    for c in range(6):
        assert counts[c, c] == 3  # aligned: bias = label
        assert counts[c, (c + 1) % 6] == 2  # conflicting: bias = (label + 1) mod 6
    assert len(splits.train) == 6 * 5
    assert len(family.load(1.0).train) == 6 * 4
    assert (splits.test.labels != splits.test.biases).all()


def test_bar_reader_missing_class_folder(tmp_path):
    raw = _bar_layout(tmp_path / "raw")
    shutil.rmtree(raw / "bar" / "test" / "fishing")
    with pytest.raises(CorruptDataError, match="expected 6 class folders"):
        BAR(raw, tmp_path / "data").prepare()


def test_source_option_and_missing_release(tmp_path):
    with pytest.raises(DataNotFoundError) as err:
        BAR(tmp_path / "raw", tmp_path / "data").load(1.0)
    text = str(err.value)
    assert str(tmp_path / "raw" / "bar.tar") in text and str(tmp_path / "raw" / "bar") in text
    assert "hint" in text
    raw = _bar_layout(tmp_path / "raw2")
    with pytest.raises(DataNotFoundError, match=r"bar\.tar"):
        BAR(raw, tmp_path / "data", source="release").load(1.0)


def test_data_info_lists_every_family(bffhq_raw, tmp_path, capsys):
    data = tmp_path / "data"
    BiasedFFHQ(bffhq_raw, data).prepare()
    assert main(["data", "info", "--raw-root", str(bffhq_raw), "--data-root", str(data)]) == 0
    out = capsys.readouterr().out
    for name in ("cmnist", "cifar10c", "bffhq", "dogs_and_cats", "bar"):
        assert name in out
    assert "MiB" in out


def test_loading_benchmark_runs_on_a_fixture(bffhq_raw, tmp_path, capsys):
    data = tmp_path / "data"
    args = ["data", "bench", "bffhq", "--raw-root", str(bffhq_raw), "--data-root", str(data)]
    assert main([*args, "--batch-size", "4", "--batches", "2", "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "samples/s" in out and "ours:" in out and "integrity check of the" in out


# ------------------------------------------------------------------ LfF npy layout
def _lff_folder(root: Path, n: int = 50, size: int = 28) -> Path:
    rng = np.random.default_rng(0)
    tag = root / "ColoredMNIST-Skewed0.01-Severity4"
    for split in ("train", "valid"):
        (tag / split).mkdir(parents=True)
        np.save(tag / split / "images.npy", rng.integers(0, 255, (n, size, size, 3), np.uint8))
        labels = np.arange(n) % 10
        np.save(tag / split / "attrs.npy", np.stack([labels, labels], 1).astype(np.uint8))
    return tag


def test_cmnist_lff_import_and_export(tmp_path, capsys):
    from debias_bench.datasets import lff_npy
    from debias_bench.datasets.cmnist import ColoredMNIST

    tag = _lff_folder(tmp_path / "lff")
    data = tmp_path / "data"
    args = ["data", "import", "cmnist", str(tag), "--ratio", "1", "--data-root", str(data)]
    assert main(args) == 0
    family = ColoredMNIST(tmp_path / "raw", data, source="lff")
    splits = family.load(1.0)
    assert len(splits.train) == 50 and splits.train.images.shape[1:] == (28, 28, 3)
    assert torch_equal(splits.test.images, np.load(tag / "valid" / "images.npy"))
    out = lff_npy.export_lff(family, 1.0, tmp_path / "out")
    assert out.name == tag.name
    np.testing.assert_array_equal(
        np.load(out / "train" / "images.npy"), np.load(tag / "train" / "images.npy")
    )
    np.testing.assert_array_equal(
        np.load(out / "train" / "attrs.npy"), np.load(tag / "train" / "attrs.npy")
    )


def test_lff_import_rejects_wrong_shapes(tmp_path):
    tag = _lff_folder(tmp_path / "lff", size=32)
    with pytest.raises(CorruptDataError, match=r"expected uint8 N x 28 x 28 x 3"):
        main_raises(
            ["data", "import", "cmnist", str(tag), "--ratio", "1", "--data-root", str(tmp_path)]
        )
    (tag / "train" / "attrs.npy").unlink()
    with pytest.raises(DataNotFoundError, match=r"attrs\.npy is missing"):
        from debias_bench.datasets.cmnist import ColoredMNIST
        from debias_bench.datasets.lff_npy import read_lff_split

        read_lff_split(tag / "train", "train", ColoredMNIST.spec)


def torch_equal(a, b) -> bool:
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def main_raises(argv: list[str]) -> None:
    """Run a `bench data` command function directly, so its BenchError reaches the test."""
    from debias_bench.cli import build_parser

    args = build_parser().parse_args(argv)
    args.func(args)


def _disent_cifar10c(root: Path) -> Path:
    c = Counter()
    base = root / "cifar10c"
    for label in range(10):
        for _ in range(3):
            c.write(base / "1pct" / "align" / str(label), label, label)
        c.write(base / "1pct" / "conflict" / str(label), label, (label + 1) % 10)
        c.write(base / "1pct" / "valid" / str(label), label, (label + 2) % 10)
        for bias in (label, (label + 3) % 10):
            c.write(base / "test" / str(label), label, bias)
    return base


def test_cifar10c_disent_png_import(tmp_path, capsys):
    from debias_bench.datasets.cifar10c import CorruptedCIFAR10

    root = _disent_cifar10c(tmp_path / "raw")
    data = tmp_path / "data"
    assert (
        main(["data", "import", "cifar10c", str(root), "--ratio", "1", "--data-root", str(data)])
        == 0
    )
    assert "disent layout" in capsys.readouterr().out
    splits = CorruptedCIFAR10(tmp_path / "raw", data, source="imported").load(1.0)
    counts = splits.train.counts(10, 10)
    assert counts.diag().tolist() == [3] * 10 and int(counts.sum()) == 40
    assert len(splits.valid) == 10 and len(splits.test) == 20  # test kept whole (unbiased)
    assert splits.train.images.shape[1:] == (32, 32, 3)
    with pytest.raises(DataNotFoundError, match=r"no folder for ratio 5%"):
        main_raises(
            ["data", "import", "cifar10c", str(root), "--ratio", "5", "--data-root", str(data)]
        )
