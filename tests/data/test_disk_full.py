"""A full disk during ``bench data prepare`` (issue 48): one ``error:`` line naming the dataset,
the data root, its free space and, when known, the write that did not fit; exit 2; no part
file or half-built folder left. It used to end in a traceback (exit 1) and, for Corrupted
CIFAR-10, leave a ``.part`` file of its raw cache behind. The full disk is simulated (the
tests run without the rights to mount a small file system); the real one was checked on a
30 MiB tmpfs with the real MNIST and CIFAR-10 files."""

from __future__ import annotations

import dataclasses
import errno
import pathlib

import numpy as np
from support.fixture_data import FixtureData

from debias_bench.datasets import cifar10_raw
from debias_bench.datasets.cifar10c import CorruptedCIFAR10
from debias_bench.datasets.cmnist import ColoredMNIST


def _left_behind(root: pathlib.Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != ".build.lock"
    )


def test_numpys_errno_less_full_disk_is_one_error_line(tmp_path, monkeypatch, capsys):
    built = FixtureData.written(ColoredMNIST, tmp_path)

    def full(file, array, *args, **kwargs):
        raise OSError("Not enough free space to write 23520000 bytes after offset 128")

    monkeypatch.setattr(np, "save", full)  # what np.save raises from ndarray.tofile
    code = built.prepare_command()
    err = capsys.readouterr().err
    assert code == 2, err  # was: 1, with a traceback
    assert "Traceback" not in err
    assert f"error: disk full while preparing cmnist in {built.data} (" in err, err
    assert "a write of 22.4 MiB did not fit" in err and "hint: free space there" in err
    assert _left_behind(built.data) == []


def test_a_full_disk_leaves_no_part_file(tmp_path, monkeypatch, capsys):
    written = FixtureData.written(CorruptedCIFAR10, tmp_path)
    # the whole fixture, as if it were all of CIFAR-10: read whole, it is cached (a .part first)
    options = {k: v for k, v in written.options.items() if k != "limit"}
    built = dataclasses.replace(written, options=options)
    monkeypatch.setattr(cifar10_raw, "EXPECTED", {"train": 40, "test": 30})
    write_bytes = pathlib.Path.write_bytes

    def full(self, data):
        if self.name.endswith(".part"):
            write_bytes(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_bytes(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", full)
    code = built.prepare_command()
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"error: disk full while preparing cifar10c in {built.data} (" in err, err
    assert "Traceback" not in err
    assert not [p for p in _left_behind(built.data) if p.endswith(".part")]  # was: one
