"""Every registered dataset builds from its own fixture and loads, as the method smoke test
covers every method: a new dataset is picked up by the registry parametrisation."""

from __future__ import annotations

import re

import pytest
import torch

from debias_bench.cli import main
from debias_bench.errors import BenchError
from debias_bench.registry import DATASETS
from debias_bench.reporting.layout import table_of

BUILT_IN = ("cmnist", "cifar10c", "bffhq", "dogs_and_cats", "bar")


def _has_fixture(name: str) -> bool:
    cls = DATASETS.get(name)
    return "write_fixture" in {k for klass in cls.__mro__[:-3] for k in vars(klass)}


@pytest.mark.parametrize("name", DATASETS.names())
def test_every_registered_dataset_builds_and_loads_from_its_fixture(name, tmp_path):
    cls = DATASETS.get(name)
    raw, data = tmp_path / "raw", tmp_path / "data"
    try:
        options = cls(raw, data).write_fixture()
    except BenchError as exc:
        if name in BUILT_IN:
            raise
        pytest.skip(f"{name}: {exc}")  # e.g. the tests' own in-memory datasets
    family = cls(raw, data, **options)
    assert family.availability() is None  # its raw sources are there now
    spec = family.spec
    for ratio in spec.ratios:
        splits = family.load(ratio)
        for split in splits:
            assert len(split) > 0, (name, ratio, split.name)
            assert tuple(split.images.shape[1:]) == (*spec.image_size, spec.channels)
            assert str(split.images.dtype) in ("uint8", "torch.uint8")
            assert int(split.labels.max()) < spec.num_classes
            assert int(split.biases.max()) < spec.num_biases
        conflicting = splits.test.labels != splits.test.biases
        if spec.test_kind == "conflicting":
            assert bool(conflicting.all()), name
        else:
            assert bool(conflicting.any()) and not bool(conflicting.all()), name
        assert bool((splits.train.labels == splits.train.biases).any())
    assert family.verify() == []
    fingerprint = family.fingerprint(spec.ratios[0])
    assert re.fullmatch(r"[0-9a-f]{16}", fingerprint)
    assert cls(raw, data, **options).fingerprint(spec.ratios[0]) == fingerprint
    if len(spec.ratios) > 1:  # Waterbirds and CelebA have one (the release's training set)
        assert family.fingerprint(spec.ratios[-1]) != fingerprint  # other training files


@pytest.mark.parametrize("name", BUILT_IN)
def test_built_in_datasets_declare_kind_fixture_and_options(name):
    entry = DATASETS.entry(name)
    assert entry.meta["kind"] in ("synthetic", "real")
    assert table_of(name) == entry.meta["kind"]
    test_kind = entry.obj.spec.test_kind
    assert (entry.meta["kind"] == "synthetic") == (test_kind == "unbiased")
    assert _has_fixture(name)
    assert "data_seed" in entry.obj.data_options()


def test_bench_data_fixture_writes_a_raw_root_that_prepares(tmp_path, capsys):
    data, raw = tmp_path / "data", tmp_path / "raw"
    assert main(["data", "fixture", "cmnist", "--out", str(raw), "--data-root", str(data)]) == 0
    hint = capsys.readouterr().out.splitlines()[-1]
    assert "--data-option valid_size=30" in hint
    argv = ["data", "prepare", "cmnist", "--raw-root", str(raw), "--data-root", str(data)]
    assert main([*argv, "--data-option", "valid_size=30"]) == 0
    assert "prepared in" in capsys.readouterr().out
    cls = DATASETS.get("cmnist")
    splits = cls(raw, data, valid_size=30).load(1.0)
    assert len(splits.valid) == 30 and isinstance(splits.train.images, torch.Tensor)


def test_a_plugin_dataset_goes_to_the_table_of_its_declared_kind():
    from debias_bench.errors import ConfigError
    from debias_bench.reporting.layout import dataset_order

    cls = DATASETS.get("toy")
    try:
        DATASETS.register("kind_real_ds", display_name="R", kind="real")(cls)
        DATASETS.register("kind_syn_ds", display_name="S", kind="synthetic")(cls)
        DATASETS.register("kind_none_ds", display_name="N")(cls)
        DATASETS.register("kind_bad_ds", display_name="B", kind="medical")(cls)
        assert table_of("kind_real_ds") == "real" and table_of("kind_syn_ds") == "synthetic"
        assert table_of("kind_none_ds") == "other"
        with pytest.raises(ConfigError, match="kind='medical'"):
            table_of("kind_bad_ds")
        order = dataset_order(["kind_syn_ds", "bar", "kind_real_ds", "cmnist"])
        assert order == ["cmnist", "bar", "kind_real_ds", "kind_syn_ds"]  # registry order
    finally:
        for name in ("kind_real_ds", "kind_syn_ds", "kind_none_ds", "kind_bad_ds"):
            DATASETS.unregister(name)
