"""`bench data download`: fixture archives served on the loopback interface (never the
network); checksums, mirrors, unpacking, the Google Drive path through a stand-in gdown."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import io
import shutil
import sys
import tarfile
import threading
import types
import urllib.request
from pathlib import Path

import pytest

from debias_bench.cli import main
from debias_bench.data.download import Download, RemoteFile, fetch, unpack
from debias_bench.datasets import bffhq as bffhq_module
from debias_bench.datasets import cifar10_raw
from debias_bench.datasets.cifar10c import CorruptedCIFAR10
from debias_bench.datasets.cmnist import ColoredMNIST
from debias_bench.errors import BenchError, CorruptDataError, DataNotFoundError


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path):
    """(folder served, base URL) of an HTTP server on 127.0.0.1."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _tar_gz(path: Path, source: Path, arcname: str) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        tar.add(source, arcname=arcname)
    return path


def test_cifar10_archive_is_checked_unpacked_and_builds(served, tmp_path, monkeypatch, capsys):
    folder, url = served
    staging = tmp_path / "made"
    cifar10_raw.write_fixture(staging)
    archive = _tar_gz(
        folder / "cifar-10-python.tar.gz", staging / "cifar-10-batches-py", "cifar-10-batches-py"
    )
    remote = dataclasses.replace(
        cifar10_raw.REMOTE,
        files=(
            dataclasses.replace(
                cifar10_raw.REMOTE.files[0],
                urls=(url + "missing.tar.gz", url + archive.name),  # first mirror: 404
                md5=_md5(archive),
            ),
        ),
    )
    monkeypatch.setattr(cifar10_raw, "REMOTE", remote)
    raw, data = tmp_path / "raw", tmp_path / "data"
    family = CorruptedCIFAR10(raw, data, limit=4, valid_size=10, n_jobs=1)
    assert "bench data download cifar10c" in (family.availability() or "")
    assert main(["data", "download", "cifar10c", "--raw-root", str(raw)]) == 0
    assert (raw / "cifar-10-batches-py" / "test_batch").is_file()
    assert not (raw / "cifar-10-python.tar.gz").exists()  # unpacked, then removed
    assert family.availability() is None
    assert len(family.load(1.0).test) == 30
    assert main(["data", "download", "cifar10c", "--raw-root", str(raw)]) == 0
    assert "already present" in capsys.readouterr().err


def test_a_checksum_mismatch_leaves_nothing_behind(served, tmp_path):
    folder, url = served
    (folder / "file.bin").write_bytes(b"not what was published")
    item = RemoteFile("file.bin", (url + "file.bin",), sha256="0" * 64)
    with pytest.raises(DataNotFoundError, match="checksum mismatch"):
        fetch(Download("x", (item,)), tmp_path / "raw", log=lambda _: None)
    assert list((tmp_path / "raw" / "x").iterdir()) == []


def test_mnist_download_through_the_cli_then_prepare(served, tmp_path, monkeypatch):
    folder, url = served
    writer = ColoredMNIST(folder.parent / "made", tmp_path / "unused")
    options = writer.write_fixture()
    made = folder.parent / "made" / "mnist"
    md5 = {}
    for path in made.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
        md5[path.name] = _md5(path)
    source = dataclasses.replace(ColoredMNIST.raw_source, mirrors=(url,), gz_md5=md5)
    monkeypatch.setattr(ColoredMNIST, "raw_source", source)
    raw, data = tmp_path / "raw", tmp_path / "data"
    assert main(["data", "download", "cmnist", "--raw-root", str(raw)]) == 0
    assert sorted(p.name for p in (raw / "mnist").iterdir()) == sorted(md5)
    argv = ["data", "prepare", "cmnist", "--raw-root", str(raw), "--data-root", str(data)]
    assert main([*argv, "--data-option", f"valid_size={options['valid_size']}"]) == 0
    # a corrupted mirror copy is refused
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(b"garbage")
    assert main(["data", "download", "cmnist", "--raw-root", str(tmp_path / "raw2")]) == 2


def test_bffhq_from_a_drive_folder_via_gdown(served, tmp_path, monkeypatch):
    """A stand-in gdown whose folder listing names the archive and whose download fetches it
    from the loopback server, as the real one fetches it from Google Drive."""
    folder, url = served
    made = tmp_path / "made"
    bffhq_module.write_fixture(made / "bffhq", aligned_per_class=3, eval_per_group=2, size=16)
    shutil.make_archive(str(folder / "bffhq"), "zip", made, "bffhq")  # published as a zip
    calls = []

    def download_folder(url=None, output=None, quiet=False, skip_download=False):
        calls.append(("list", url, skip_download))
        return [types.SimpleNamespace(id="bffhq-id", path="bffhq.zip", local_path="")]

    def download(id=None, output=None, quiet=False):
        calls.append(("get", id))
        with urllib.request.urlopen(url + "bffhq.zip") as response:
            Path(output).write_bytes(response.read())
        return output

    fake = types.SimpleNamespace(download_folder=download_folder, download=download)
    monkeypatch.setitem(sys.modules, "gdown", fake)
    raw = tmp_path / "raw"
    assert main(["data", "download", "bffhq", "--raw-root", str(raw)]) == 0
    assert calls == [("list", bffhq_module.DRIVE_FOLDER, True), ("get", "bffhq-id")]
    assert (raw / "bffhq" / "0.5pct" / "align").is_dir() and not (raw / ".gdrive").exists()
    family = bffhq_module.BiasedFFHQ(raw, tmp_path / "data")
    assert family.source_kind() == "release" and len(family.load(0.5).test) == 4


def test_bffhq_without_gdown_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gdown", None)  # import gdown -> ImportError
    with pytest.raises(BenchError, match="gdown") as err:
        fetch(bffhq_module.REMOTE, tmp_path, log=lambda _: None)
    assert "debias-bench[download]" in (err.value.hint or "")


def test_an_archive_reaching_outside_its_folder_is_refused(tmp_path):
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(CorruptDataError, match="outside"):
        unpack(archive, tmp_path / "into", log=lambda _: None)
    assert not (tmp_path / "outside.txt").exists()


def test_a_dataset_without_public_sources(tmp_path, capsys):
    assert main(["data", "download", "bar", "--raw-root", str(tmp_path)]) == 1
    assert "no public download" in capsys.readouterr().err


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar10_batches_are_read_without_running_code(tmp_path, protocol):
    """A downloaded batch is never trusted to name a callable: the official layout (a dict of
    a uint8 array and a label list, any pickle protocol) reads; a batch whose pickle would run
    a command is refused, naming the global, and the command never runs."""
    import pickle

    import numpy as np

    data = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    good = pickle.dumps({"data": data, "labels": [3, 5]}, protocol=protocol)
    assert (cifar10_raw._unpickle_batch(good)["data"] == data).all()

    marker = tmp_path / "payload-ran"
    bad = pickle.dumps({"data": _Payload(marker), "labels": []}, protocol=protocol)
    with pytest.raises(CorruptDataError, match=r"names (posix|os)\.system"):
        cifar10_raw._unpickle_batch(bad)
    assert not marker.exists()
