"""Prepared data is checked against its manifest before a run reads it (issue 14, item 2)."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from debias_bench import integrity
from debias_bench.cli import main
from debias_bench.datasets.bar import BAR
from debias_bench.datasets.cmnist import ColoredMNIST
from debias_bench.errors import CorruptDataError


@pytest.fixture
def cmnist_fixture(tmp_path):
    """A Colored MNIST built from tiny idx files: (raw root, data root, options)."""
    raw, data = tmp_path / "raw", tmp_path / "data"
    options = ColoredMNIST(raw, data).write_fixture()
    ColoredMNIST(raw, data, **options).prepare()
    return raw, data, options


def _zero_half(path) -> None:
    array = np.load(path)
    array[: len(array) // 2] = 0
    np.save(path, array)


def _prepare(raw, data, *extra: str) -> int:
    argv = ["data", "prepare", "cmnist", "--raw-root", str(raw), "--data-root", str(data)]
    return main([*argv, "--data-option", "valid_size=30", *extra])


def test_a_changed_prepared_file_is_an_error_naming_it_and_the_fix(cmnist_fixture, capsys):
    raw, data, options = cmnist_fixture
    family = ColoredMNIST(raw, data, **options)
    before = family.fingerprint(1.0)
    target = family.folder / "1pct" / "train" / "images.npy"
    _zero_half(target)
    with pytest.raises(CorruptDataError) as err:
        ColoredMNIST(raw, data, **options).load(1.0)
    assert str(target) in str(err.value)
    assert "bench data prepare cmnist --force" in str(err.value)
    # other ratios read other training files: still fine
    ColoredMNIST(raw, data, **options).load(2.0)
    # a plain prepare leaves prepared data alone; --force rebuilds it, identically
    assert _prepare(raw, data) == 0
    with pytest.raises(CorruptDataError):
        ColoredMNIST(raw, data, **options).load(1.0)
    assert _prepare(raw, data, "--force") == 0
    again = ColoredMNIST(raw, data, **options)
    again.load(1.0)
    assert again.fingerprint(1.0) == before


def test_a_missing_manifest_is_detected_and_prepare_restores_it(cmnist_fixture, capsys):
    raw, data, options = cmnist_fixture
    family = ColoredMNIST(raw, data, **options)
    manifest = family.folder / "manifest.json"
    manifest.unlink()
    assert not family.is_prepared()
    with pytest.raises(CorruptDataError, match=r"manifest\.json is missing"):
        integrity.check_files(family.folder, [], trust_stat=False, fix=family.repair_command())
    assert _prepare(raw, data) == 0
    assert "has no manifest.json; rebuilding it" in capsys.readouterr().err
    assert manifest.is_file() and family.verify() == []
    # a run (load) that finds no manifest rebuilds too, saying so, never reads unchecked data
    manifest.unlink()
    ColoredMNIST(raw, data, **options).load(0.5)
    assert manifest.is_file()


def test_the_fingerprint_follows_the_content(cmnist_fixture):
    raw, data, options = cmnist_fixture
    one = ColoredMNIST(raw, data, **options)
    other = ColoredMNIST(raw, data, **options, data_seed=1)
    assert one.fingerprint(1.0) != other.fingerprint(1.0)  # different draws
    assert one.fingerprint() == ColoredMNIST(raw, data, **options).fingerprint()
    assert one.fingerprint(1.0) != one.fingerprint()  # a ratio's files vs all of them


@pytest.fixture
def bar_fixture(tmp_path):
    raw, data = tmp_path / "raw", tmp_path / "data"
    options = BAR(raw, data).write_fixture()
    BAR(raw, data, **options).prepare()
    return raw, data, options


def test_memory_mapped_files_are_hashed_once_then_trusted_by_size_and_mtime(
    bar_fixture, monkeypatch
):
    raw, data, options = bar_fixture
    calls = []
    real = integrity.sha256
    monkeypatch.setattr(integrity, "sha256", lambda p: calls.append(p) or real(p))
    BAR(raw, data, **options).load(5.0)
    assert len(calls) == 6  # train, valid, test x (images, attrs)
    family = BAR(raw, data, **options)
    cache = json.loads((family.folder / integrity.VERIFIED_CACHE).read_text())
    assert len(cache) == 6
    calls.clear()
    BAR(raw, data, **options).load(5.0)
    assert calls == []  # trusted: same size and mtime
    # a changed file (same size, new mtime) is hashed again and refused
    target = family.folder / "test" / "images.npy"
    images = np.load(target)
    images[0] = 255 - images[0]
    np.save(target, images)
    with pytest.raises(CorruptDataError, match=str(target)):
        BAR(raw, data, **options).load(5.0)
    assert calls == [target]  # only the changed file was hashed again


def test_in_memory_files_are_hashed_every_time(cmnist_fixture, monkeypatch):
    """A 28-px set is re-hashed at every load: a change that keeps size and mtime is caught."""
    raw, data, options = cmnist_fixture
    family = ColoredMNIST(raw, data, **options)
    target = family.folder / "test" / "images.npy"
    stat = target.stat()
    with open(target, "r+b") as handle:  # flip one pixel in place, then restore the mtime
        handle.seek(stat.st_size - 1)
        byte = handle.read(1)
        handle.seek(stat.st_size - 1)
        handle.write(bytes([255 - byte[0]]))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(CorruptDataError, match="does not match its checksum"):
        ColoredMNIST(raw, data, **options).load(5.0)


@pytest.mark.realdata
def test_the_check_costs_well_under_a_second_on_real_colored_mnist(raw_root, data_root):
    family = ColoredMNIST(raw_root, data_root)
    family.prepare()
    start = time.perf_counter()
    digests = family.checked_files(1.0)
    elapsed = time.perf_counter() - start
    size = sum((family.folder / rel).stat().st_size for rel in digests)
    print(f"integrity check of {size / 2**20:.0f} MiB: {elapsed:.3f} s")
    assert size > 150 * 2**20 and elapsed < 0.8
