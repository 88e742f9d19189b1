"""`bench data download waterbirds|celeba` against mirrors on the loopback interface (never the
network): a good file, a corrupt one, a dead mirror then a good one, a download cut part-way
and resumed; then the downloaded release prepares."""

from __future__ import annotations

import dataclasses
import json

import pytest
from support.subpop_fixtures import (
    Mirror,
    celeba_files,
    dead_url,
    md5,
    serving,
    sha256,
    waterbirds_tarball,
)

from debias_bench.cli import main
from debias_bench.data.download import Download, RemoteFile, fetch
from debias_bench.data.resumable import Pinned, fetch_file
from debias_bench.datasets import celeba, waterbirds
from debias_bench.errors import DataNotFoundError

TAR = f"{waterbirds.RELEASE}.tar.gz"


def _pin_waterbirds(monkeypatch, urls, digest):
    item = dataclasses.replace(waterbirds.TARBALL, urls=tuple(urls), sha256=digest)
    monkeypatch.setattr(waterbirds, "REMOTE", dataclasses.replace(waterbirds.REMOTE, files=(item,)))


def test_waterbirds_from_a_dead_mirror_then_a_good_one_then_prepares(tmp_path, monkeypatch, capsys):
    tarball = waterbirds_tarball(tmp_path / "made")
    with serving(Mirror(files={TAR: tarball})) as mirror:
        dead = dead_url()
        _pin_waterbirds(monkeypatch, [dead, mirror.url + TAR], sha256(tarball))
        raw, data = tmp_path / "raw", tmp_path / "data"
        assert main(["data", "download", "waterbirds", "--raw-root", str(raw)]) == 0
    err = capsys.readouterr().err
    assert f"downloading {dead}" in err and f"downloading {mirror.url}{TAR}" in err
    release = raw / "waterbirds" / waterbirds.RELEASE
    assert (release / "metadata.csv").is_file() and not (raw / "waterbirds" / TAR).exists()
    argv = ["data", "prepare", "waterbirds", "--raw-root", str(raw), "--data-root", str(data)]
    assert main(argv) == 0
    manifest = next(data.glob("waterbirds/v1/release-*/manifest.json"))
    splits = json.loads(manifest.read_text())["splits"]
    assert splits["5pct/train"]["counts"] == [list(r) for r in waterbirds.FIXTURE_COUNTS["train"]]
    assert splits["test"]["counts"] == [list(r) for r in waterbirds.FIXTURE_COUNTS["test"]]


def test_a_corrupt_file_on_every_mirror_names_each_url_and_the_checksum(
    tmp_path, monkeypatch, capsys
):
    tarball = waterbirds_tarball(tmp_path / "made")
    wanted = sha256(tarball)
    with serving(Mirror(files={TAR: tarball[:-10] + b"0123456789"})) as mirror:
        dead = dead_url()
        _pin_waterbirds(monkeypatch, [mirror.url + TAR, dead], wanted)
        raw = tmp_path / "raw"
        assert main(["data", "download", "waterbirds", "--raw-root", str(raw)]) == 2
    err = capsys.readouterr().err
    assert f"expected sha256 {wanted}" in err
    assert f"{mirror.url}{TAR}: checksum mismatch: got sha256 " in err
    assert f"{dead}: " in err and "Traceback" not in err
    assert sorted(p.name for p in (raw / "waterbirds").iterdir()) == []  # no .part, no file


def test_a_download_cut_part_way_resumes_with_a_range_request(tmp_path, monkeypatch, capsys):
    tarball = waterbirds_tarball(tmp_path / "made")
    half = len(tarball) // 2
    mirror = Mirror(files={TAR: tarball}, cut_after={TAR: half})
    with serving(mirror):
        _pin_waterbirds(monkeypatch, [mirror.url + TAR], sha256(tarball))
        raw = tmp_path / "raw"
        assert main(["data", "download", "waterbirds", "--raw-root", str(raw)]) == 2
        part = raw / "waterbirds" / f"{TAR}.part"
        assert part.stat().st_size == half  # kept, and said so
        assert "to resume" in capsys.readouterr().err
        assert main(["data", "download", "waterbirds", "--raw-root", str(raw)]) == 0
    assert mirror.seen == [(TAR, None), (TAR, f"bytes={half}-")]
    assert f"resuming {TAR} at byte {half:,}" in capsys.readouterr().err
    assert (raw / "waterbirds" / waterbirds.RELEASE / "metadata.csv").is_file()


def test_a_resumed_file_with_another_files_bytes_is_fetched_again(tmp_path):
    good = b"the published bytes" * 100
    target = tmp_path / "file.bin"
    target.with_name("file.bin.part").write_bytes(b"X" * 50)  # a stale start of another file
    with serving(Mirror(files={"file.bin": good})) as mirror:
        fetch_file("file.bin", (mirror.url + "file.bin",), Pinned(sha256(good)), target, print)
    assert target.read_bytes() == good
    assert mirror.seen == [("file.bin", "bytes=50-"), ("file.bin", None)]


def test_an_unpinned_file_is_downloaded_and_its_sha256_said(tmp_path):
    data = b"no checksum published for me"
    lines: list[str] = []
    with serving(Mirror(files={"f.bin": data})) as mirror:
        item = RemoteFile("f.bin", (mirror.url + "f.bin",))
        fetch(Download("x", (item,)), tmp_path, log=lines.append)
    assert f"f.bin: no checksum is published; its sha256 is {sha256(data)}" in lines


def test_celeba_files_by_md5_then_prepare(tmp_path, monkeypatch):
    files = celeba_files(tmp_path / "made")
    with serving(Mirror(files=files)) as mirror:
        remote = dataclasses.replace(
            celeba.REMOTE,
            files=tuple(
                dataclasses.replace(item, urls=(mirror.url + item.name,), md5=md5(files[item.name]))
                for item in celeba.FILES
            ),
        )
        monkeypatch.setattr(celeba, "REMOTE", remote)
        raw, data = tmp_path / "raw", tmp_path / "data"
        assert main(["data", "download", "celeba", "--raw-root", str(raw)]) == 0
    assert len(list((raw / "celeba" / celeba.IMAGES).iterdir())) == 65
    argv = ["data", "prepare", "celeba", "--raw-root", str(raw), "--data-root", str(data)]
    assert main(argv) == 0
    family = celeba.CelebA(raw, data)
    assert family.source_kind() == "release" and family.verify() == []


def test_a_wrong_md5_fails_without_leaving_a_file(tmp_path):
    with serving(Mirror(files={"a.txt": b"abc"})) as mirror:
        item = RemoteFile("a.txt", (mirror.url + "a.txt",), md5="0" * 32)
        with pytest.raises(DataNotFoundError, match=f"expected md5 {'0' * 32}"):
            fetch(Download("x", (item,)), tmp_path, log=lambda _: None)
    assert list((tmp_path / "x").iterdir()) == []
