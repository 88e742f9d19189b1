"""Raw MNIST files found in the raw root are checked against the release's MD5s before a build
(issue 48): a damaged file used to build without a word (only downloads were checked)."""

from __future__ import annotations

import gzip
import shutil

from debias_bench.cli import main
from debias_bench.data.raw_checks import check_raw_sources
from debias_bench.datasets.cmnist import ColoredMNIST

FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte")  # fmt: skip


def _damaged_copy(raw_root, tmp_path):
    """The real MNIST files under ``tmp_path/raw/mnist``, one test label changed (the same
    length, the same header): the damaged file."""
    raw = tmp_path / "raw" / "mnist"
    raw.mkdir(parents=True)
    for stem in FILES:
        shutil.copy(raw_root / "mnist" / f"{stem}.gz", raw)
    damaged = raw / "t10k-labels-idx1-ubyte.gz"
    content = bytearray(gzip.decompress(damaged.read_bytes()))
    content[100] = (content[100] + 1) % 10
    damaged.write_bytes(gzip.compress(bytes(content)))
    return damaged


def test_a_damaged_mnist_file_in_the_raw_root_is_refused_naming_it(tmp_path, raw_root, capsys):
    damaged = _damaged_copy(raw_root, tmp_path)
    data = tmp_path / "data"
    code = main(["data", "prepare", "cmnist", "--raw-root", str(tmp_path / "raw"),
                 "--data-root", str(data)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{damaged} is damaged: its content has MD5" in err, err  # was: exit 0, built
    assert "Traceback" not in err and "hint: replace it" in err
    assert not ColoredMNIST(tmp_path / "raw", data).is_prepared()


def test_a_sweep_on_a_damaged_mnist_file_starts_nothing(tmp_path, raw_root, capsys):
    damaged = _damaged_copy(raw_root, tmp_path)
    out = tmp_path / "runs"
    code = main(["run", "--methods", "vanilla", "--datasets", "cmnist", "--ratios", "1",
                 "--seeds", "0", "--device", "cpu", "--preset", "smoke",
                 "--raw-root", str(tmp_path / "raw"),
                 "--data-root", str(tmp_path / "data"), "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err  # was: the run built and trained on it
    assert "error: data not usable; nothing was started" in err, err
    assert f"{damaged} is damaged" in err and not out.exists()


def test_the_released_files_and_a_fixture_pass(tmp_path, raw_root):
    check_raw_sources(ColoredMNIST(raw_root, tmp_path / "data"))  # the real, re-gzipped files
    fixture = ColoredMNIST(tmp_path / "raw", tmp_path / "data")
    fixture.write_fixture()  # tiny idx files under MNIST's names: another length
    check_raw_sources(fixture)
