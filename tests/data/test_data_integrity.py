"""Prepared data is checked against its manifest before a run reads it (issue 14, item 2)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from support.fixture_data import FixtureData

from debias_bench.data import integrity
from debias_bench.data.split_store import SPLIT_FILES
from debias_bench.datasets.bar import BAR
from debias_bench.datasets.cmnist import ColoredMNIST
from debias_bench.errors import CorruptDataError


@pytest.fixture
def cmnist(tmp_path) -> FixtureData[ColoredMNIST]:
    """A Colored MNIST built from tiny idx files."""
    return FixtureData.prepared(ColoredMNIST, tmp_path)


def _zero_half(path) -> None:
    array = np.load(path)
    array[: len(array) // 2] = 0
    np.save(path, array)


def test_a_changed_prepared_file_is_an_error_naming_it_and_the_fix(cmnist, capsys):
    family = cmnist.family()
    before = family.fingerprint(1.0)
    target = family.folder / "1pct" / "train" / "images.npy"
    _zero_half(target)
    with pytest.raises(CorruptDataError) as err:
        cmnist.family().load(1.0)
    assert str(target) in str(err.value)
    assert "bench data prepare cmnist --force" in str(err.value)
    # other ratios read other training files: still fine
    cmnist.family().load(2.0)
    # a plain prepare leaves prepared data alone; --force rebuilds it, identically
    assert cmnist.prepare_command() == 0
    with pytest.raises(CorruptDataError):
        cmnist.family().load(1.0)
    assert cmnist.prepare_command("--force") == 0
    again = cmnist.family()
    again.load(1.0)
    assert again.fingerprint(1.0) == before


def test_a_missing_manifest_is_detected_and_prepare_restores_it(cmnist, capsys):
    family = cmnist.family()
    manifest = family.folder / "manifest.json"
    manifest.unlink()
    assert not family.is_prepared()
    with pytest.raises(CorruptDataError, match=r"manifest\.json is missing"):
        integrity.check_files(family.folder, [], trust_stat=False, fix=family.repair_command())
    assert cmnist.prepare_command() == 0
    assert "has no manifest.json; rebuilding it" in capsys.readouterr().err
    assert manifest.is_file() and family.verify() == []
    # a run (load) that finds no manifest rebuilds too, saying so, never reads unchecked data
    manifest.unlink()
    cmnist.family().load(0.5)
    assert manifest.is_file()


def test_the_fingerprint_follows_the_content(cmnist):
    one = cmnist.family()
    other = cmnist.family(data_seed=1)
    assert one.fingerprint(1.0) != other.fingerprint(1.0)  # different draws
    assert one.fingerprint() == cmnist.family().fingerprint()
    assert one.fingerprint(1.0) != one.fingerprint()  # a ratio's files vs all of them


@pytest.fixture
def bar(tmp_path) -> FixtureData[BAR]:
    """A BAR built from tiny fixture images (memory-mapped splits)."""
    return FixtureData.prepared(BAR, tmp_path)


def test_memory_mapped_files_are_hashed_once_then_trusted_by_size_and_mtime(bar, monkeypatch):
    family = bar.family()
    manifest = json.loads((family.folder / "manifest.json").read_text())
    cache = json.loads((family.folder / integrity.VERIFIED_CACHE).read_text())
    assert set(cache) == set(manifest["files"])  # the build stamped every file it hashed
    calls = []
    real = integrity.sha256
    monkeypatch.setattr(integrity, "sha256", lambda p: calls.append(p) or real(p))
    bar.family().load(5.0)
    assert calls == []  # trusted: same size and mtime as when the build hashed them
    # a store whose stamps are gone (prepared by an older bench): hashed once, then trusted
    (family.folder / integrity.VERIFIED_CACHE).unlink()
    bar.family().load(5.0)
    assert len(calls) == 6  # train, valid, test x (images, attrs)
    assert len(json.loads((family.folder / integrity.VERIFIED_CACHE).read_text())) == 6
    calls.clear()
    bar.family().load(5.0)
    assert calls == []
    # a changed file (same size, new mtime) is hashed again and refused
    target = family.folder / "test" / "images.npy"
    images = np.load(target)
    images[0] = 255 - images[0]
    np.save(target, images)
    with pytest.raises(CorruptDataError, match=str(target)):
        bar.family().load(5.0)
    assert calls == [target]  # only the changed file was hashed again


def test_in_memory_files_are_hashed_every_time(cmnist, monkeypatch):
    """A 28-px set is re-hashed at every load: a change that keeps size and mtime is caught."""
    family = cmnist.family()
    target = family.folder / "test" / "images.npy"
    stat = target.stat()
    with open(target, "r+b") as handle:  # flip one pixel in place, then restore the mtime
        handle.seek(stat.st_size - 1)
        byte = handle.read(1)
        handle.seek(stat.st_size - 1)
        handle.write(bytes([255 - byte[0]]))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(CorruptDataError, match="does not match its checksum"):
        cmnist.family().load(5.0)


@pytest.mark.realdata
def test_the_check_covers_every_file_a_real_colored_mnist_run_reads(raw_root, data_root):
    """What the check covers; what it costs is measured by `bench data bench` (no timed test)."""
    family = ColoredMNIST(raw_root, data_root)
    family.prepare()
    digests = family.checked_files(1.0)
    _, dirs = family.split_dirs(1.0)
    read = {str((d / f).relative_to(family.folder)) for d in dirs.values() for f in SPLIT_FILES}
    assert set(digests) == read
    assert sum((family.folder / rel).stat().st_size for rel in digests) > 150 * 2**20
