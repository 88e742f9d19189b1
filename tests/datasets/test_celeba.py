"""CelebA from torchvision's layout: the official partition with the attribute files' counts
per (target, bias) group, other attribute pairs and codings as data options, clear errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from debias_bench.cli import main
from debias_bench.datasets import celeba
from debias_bench.errors import ConfigError, CorruptDataError

SPLIT_DIRS = {"0": "44.9pct/train", "1": "valid", "2": "test"}


def _attribute_counts(root: Path, target: str, bias: str, flipped: bool) -> dict:
    """Per prepared split folder, the (class, coded bias) counts of the two text files, read
    independently of the dataset's own reader."""
    lines = (root / celeba.ATTRS).read_text().splitlines()
    names = lines[1].split()
    values = {p[0]: p[1:] for p in (line.split() for line in lines[2:])}
    split_of = dict(line.split() for line in (root / celeba.PARTITION).read_text().splitlines())
    found: Counter = Counter()
    for name, split in split_of.items():
        y = int(values[name][names.index(target)] == "1")
        a = int(values[name][names.index(bias)] == "1")
        found[(split, y, 1 - a if flipped else a)] += 1
    return {
        folder: [[found[(split, y, b)] for b in (0, 1)] for y in (0, 1)]
        for split, folder in SPLIT_DIRS.items()
    }


def _prepare(raw: Path, data: Path, *options: str) -> dict:
    argv = ["data", "prepare", "celeba", "--raw-root", str(raw), "--data-root", str(data)]
    for option in options:
        argv += ["--data-option", option]
    assert main(argv) == 0
    folder = "release-seed0" + "".join(
        f"-{o.split('=')[1]}" for o in options if not o.startswith("limit")
    )
    return json.loads((data / "celeba" / "v1" / folder / "manifest.json").read_text())


def test_torchvisions_layout_prepares_with_the_attribute_files_counts(tmp_path, capsys):
    root = celeba.write_release(tmp_path / "raw" / "celeba", scale=2)
    manifest = _prepare(tmp_path / "raw", tmp_path / "data")
    counts = {k: v["counts"] for k, v in manifest["splits"].items()}
    assert counts == _attribute_counts(root, "Blond_Hair", "Male", flipped=True)
    # bias 0 = Male: aligned = not-blond men and blond women; blond men are conflicting
    assert counts["44.9pct/train"] == [[26, 28], [4, 16]]
    assert manifest["splits"]["valid"]["image_shape"] == [224, 224, 3]
    assert "(Blond_Hair, Male) 4" in capsys.readouterr().err


def test_another_attribute_pair_and_coding(tmp_path):
    root = celeba.write_release(tmp_path / "raw" / "celeba")
    options = ("target=Smiling", "bias=Young", "bias_coding=value")
    manifest = _prepare(tmp_path / "raw", tmp_path / "data", *options)
    counts = {k: v["counts"] for k, v in manifest["splits"].items()}
    assert counts == _attribute_counts(root, "Smiling", "Young", flipped=False)
    family = celeba.CelebA(tmp_path / "raw", tmp_path / "data", target="Smiling", bias="Young")
    assert family.spec.class_names == ("not Smiling", "Smiling")
    assert family.spec.bias_names == ("Young", "not Young")


def test_a_bad_pair_is_refused_before_anything_runs(tmp_path, capsys):
    with pytest.raises(ConfigError, match="target and bias are both Male"):
        celeba.CelebA(tmp_path, tmp_path, target="Male")
    argv = ["data", "prepare", "celeba", "--raw-root", str(tmp_path), "--data-root", str(tmp_path)]
    assert main([*argv, "--data-option", "target=Blonde"]) == 2
    err = capsys.readouterr().err
    assert "Blonde" in err and "Blond_Hair" in err and "Traceback" not in err


def test_missing_and_inconsistent_files_are_named(tmp_path, capsys):
    argv = ["data", "prepare", "celeba", "--raw-root", str(tmp_path / "raw")]
    assert main([*argv, "--data-root", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "raw" / "celeba") in err and "bench data download celeba" in err
    root = celeba.write_release(tmp_path / "raw" / "celeba")
    family = celeba.CelebA(tmp_path / "raw", tmp_path / "data")
    attrs = (root / celeba.ATTRS).read_text().splitlines()
    (root / celeba.ATTRS).write_text("\n".join(attrs[:-1]) + "\n")
    with pytest.raises(CorruptDataError, match=r"lists 1 images that list_attr_celeba\.txt has no"):
        family.rows()
    (root / celeba.ATTRS).write_text("\n".join([*attrs[:3], attrs[3] + " 1"]) + "\n")
    with pytest.raises(CorruptDataError, match="line 4: 41 values for 40 attributes"):
        family.rows()
