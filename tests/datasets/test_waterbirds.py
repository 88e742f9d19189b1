"""Waterbirds from the layouts its release and the WILDS copy unpack to: the official splits with
the metadata's counts per (bird, background) group, GroupDRO's framing, clear errors for
missing or damaged data, the adjusted average, the ResNet-50's weights looked for offline."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from debias_bench.cli import main
from debias_bench.datasets import waterbirds
from debias_bench.datasets.metadata_family import Framing, frame
from debias_bench.datasets.resnet50 import WEIGHT_FILES, imagenet_resnet50_weights
from debias_bench.errors import CorruptDataError, DataNotFoundError

SPLIT_DIRS = {"0": "5pct/train", "1": "valid", "2": "test"}


def _metadata_counts(release: Path) -> dict[str, list[list[int]]]:
    """Per prepared split folder, the (y, place) counts of metadata.csv, read independently."""
    with open(release / "metadata.csv", newline="") as handle:
        found = Counter((r["split"], int(r["y"]), int(r["place"])) for r in csv.DictReader(handle))
    return {
        folder: [[found[(split, y, p)] for p in (0, 1)] for y in (0, 1)]
        for split, folder in SPLIT_DIRS.items()
    }


def _prepare(raw: Path, data: Path, *options: str) -> dict:
    argv = ["data", "prepare", "waterbirds", "--raw-root", str(raw), "--data-root", str(data)]
    for option in options:
        argv += ["--data-option", option]
    assert main(argv) == 0
    manifests = sorted(data.glob("waterbirds/v1/*/manifest.json"))
    return json.loads(manifests[-1].read_text())


def test_the_release_layout_prepares_with_the_metadatas_group_counts(tmp_path, capsys):
    release = waterbirds.write_release(
        tmp_path / "raw" / "waterbirds" / waterbirds.RELEASE,
        counts={"train": ((30, 2), (1, 11)), "valid": ((3, 3), (3, 3)), "test": ((4, 4), (4, 4))},
    )
    manifest = _prepare(tmp_path / "raw", tmp_path / "data")
    counts = {k: v["counts"] for k, v in manifest["splits"].items()}
    assert counts == _metadata_counts(release)
    assert manifest["params"]["source_kind"] == "release"
    assert manifest["splits"]["test"]["image_shape"] == [224, 224, 3]
    err = capsys.readouterr().err
    assert "waterbirds train: 44 images: (landbird, land) 30, (landbird, water) 2" in err
    assert "6.82 % of the training images are bias-conflicting" in err


def test_the_wilds_copy_is_read_as_well(tmp_path):
    made = waterbirds.write_release(tmp_path / "made")
    wilds = tmp_path / "raw" / "waterbirds" / waterbirds.WILDS
    shutil.copytree(made, wilds)
    family = waterbirds.Waterbirds(tmp_path / "raw", tmp_path / "data")
    assert family.source_kind() == "wilds"
    splits = family.load(5.0)
    assert [len(s) for s in splits] == [60, 16, 20]
    group = (splits.train.labels * 2 + splits.train.biases).bincount(minlength=4).tolist()
    assert group == [38, 2, 1, 19]


def test_limit_per_group_keeps_the_first_images_of_each_group(tmp_path):
    waterbirds.write_release(tmp_path / "raw" / "waterbirds" / waterbirds.RELEASE)
    manifest = _prepare(tmp_path / "raw", tmp_path / "data", "limit_per_group=3")
    assert manifest["splits"]["5pct/train"]["counts"] == [[3, 2], [1, 3]]
    assert manifest["splits"]["valid"]["counts"] == [[3, 3], [3, 3]]


def test_framing_is_torchvisions_resize_then_centre_crop():
    transforms = pytest.importorskip("torchvision.transforms")
    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 255, (300, 420, 3), dtype=np.uint8))
    ours = frame(img, waterbirds.Waterbirds.framing, (224, 224))
    theirs = transforms.Compose([transforms.Resize((256, 256)), transforms.CenterCrop(224)])(img)
    assert np.array_equal(ours, np.asarray(theirs))
    celeba_like = Image.fromarray(rng.integers(0, 255, (218, 178, 3), dtype=np.uint8))
    ours = frame(celeba_like, Framing(resize=None, crop_to_size=False), (224, 224))
    theirs = transforms.Compose([transforms.CenterCrop(178), transforms.Resize(224)])(celeba_like)
    assert np.array_equal(ours, np.asarray(theirs))


def test_no_data_names_where_it_looked_and_the_command(tmp_path, capsys):
    argv = ["data", "prepare", "waterbirds", "--raw-root", str(tmp_path / "raw")]
    assert main([*argv, "--data-root", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "raw" / "waterbirds" / waterbirds.RELEASE) in err
    assert str(tmp_path / "raw" / "waterbirds" / waterbirds.WILDS) in err
    assert "bench data download waterbirds" in err and "Traceback" not in err


def test_damaged_metadata_and_missing_images_are_named(tmp_path, capsys):
    release = waterbirds.write_release(tmp_path / "raw" / "waterbirds" / waterbirds.RELEASE)
    family = waterbirds.Waterbirds(tmp_path / "raw", tmp_path / "data")
    lines = (release / "metadata.csv").read_text().splitlines()
    victim = lines[5].split(",")[1]
    (release / victim).unlink()
    with pytest.raises(CorruptDataError, match=r"1 of the 96 images metadata\.csv lists are"):
        family.selected_rows()
    lines[3] = lines[3].replace(",0,0,", ",2,0,", 1)  # y = 2 on line 4
    (release / "metadata.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptDataError, match=r"metadata\.csv line 4: y=2"):
        family.rows()
    argv = ["data", "prepare", "waterbirds", "--raw-root", str(tmp_path / "raw")]
    assert main([*argv, "--data-root", str(tmp_path / "data")]) == 2
    assert "line 4: y=2" in capsys.readouterr().err


def test_adjusted_average_weights_test_groups_by_the_training_groups():
    accuracy = [[90.0, 80.0], [70.0, 95.0]]
    expected = (3498 * 90 + 184 * 80 + 56 * 70 + 1057 * 95) / 4795
    assert waterbirds.adjusted_average(accuracy) == pytest.approx(expected)
    assert waterbirds.adjusted_average([[90.0, None], [70.0, 95.0]]) is None
    assert sum(map(sum, waterbirds.TRAIN_GROUP_COUNTS)) == waterbirds.Waterbirds.train_sizes[5.0]


def test_the_resnet50_weights_are_looked_for_and_named_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.delenv("BENCH_RESNET50_WEIGHTS", raising=False)
    with pytest.raises(DataNotFoundError) as err:
        imagenet_resnet50_weights()
    assert WEIGHT_FILES[0] in err.value.message
    assert str(tmp_path / "torch" / "hub" / "checkpoints" / WEIGHT_FILES[0]) in err.value.message
    assert "IMAGENET1K_V1" in (err.value.hint or "")
    cached = tmp_path / "torch" / "hub" / "checkpoints" / WEIGHT_FILES[0]
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"")
    assert imagenet_resnet50_weights() == cached
