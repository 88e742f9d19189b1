"""A release archive's extraction is reused only for that very archive (issue 48, WRONG 4):
``bench data prepare dogs_and_cats`` from a fixture tar, then ``--force`` from another tar in
the same data root, built the second from the first one's extraction (exit 0, the manifest
naming the new tar, the counts the fixture's, ``bench data verify`` OK). BAR shared the code."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from debias_bench.cli import main
from debias_bench.data.extraction import MARKER, extract_archive
from debias_bench.datasets.bar import BAR
from debias_bench.datasets.dogs_and_cats import DogsAndCats
from debias_bench.datasets.images import fixture_jpeg, write_tar
from debias_bench.errors import CorruptDataError


def _members(tar_path: Path) -> dict[str, bytes]:
    with tarfile.open(tar_path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def _grow_dogs(files: dict[str, bytes]) -> dict[str, bytes]:
    """Four more dark cats (bias-aligned training images)."""
    names = [f"cat.{900 + i}.jpg" for i in range(4)]
    files.update({f"images/{n}": fixture_jpeg(0, 0, 900 + i) for i, n in enumerate(names)})
    files["list_dark.txt"] += ("\n" + "\n".join(names)).encode()
    return files


def _grow_bar(files: dict[str, bytes]) -> dict[str, bytes]:
    """Four more climbing images in the release's train folder (bias-aligned)."""
    files.update({f"train/climbing_{90 + i}.jpg": fixture_jpeg(0, 0, 990 + i) for i in range(4)})
    return files


def _train_size(family) -> int:
    return len(family.load(family.spec.ratios[0]).train)


@pytest.mark.parametrize(
    "cls, tar, grow",
    [(DogsAndCats, "dogs-and-cats-128.tar", _grow_dogs), (BAR, "bar.tar", _grow_bar)],
)
def test_prepare_force_from_another_archive_builds_from_that_archive(
    tmp_path, capsys, cls, tar, grow
):
    data, first, second = tmp_path / "data", tmp_path / "fixture", tmp_path / "real"
    options = cls(first, data).write_fixture()
    flags = [f"--data-option=source={options['source']}", "--data-root", str(data)]
    assert main(["data", "prepare", cls.spec.name, "--raw-root", str(first), *flags]) == 0
    before = _train_size(cls(first, data, **options))

    write_tar(second / tar, grow(_members(first / tar)))  # another archive, the same build tag
    code = main(["data", "prepare", cls.spec.name, "--raw-root", str(second), "--force", *flags])
    err = capsys.readouterr().err
    assert code == 0, err
    assert _train_size(cls(second, data, **options)) == before + 4  # was: the fixture's count
    assert f"holds an extraction of {first / tar}, not of {second / tar}" in err


def test_an_extraction_is_reused_for_the_same_archive_only(tmp_path, capsys):
    one = write_tar(tmp_path / "one.tar", {"a.txt": b"one"})
    copy = write_tar(tmp_path / "elsewhere" / "one.tar", {"a.txt": b"one"})
    two = write_tar(tmp_path / "two.tar", {"b.txt": b"two"})
    target = tmp_path / "extracted" / "x"
    extract_archive(one, target)
    (target / "a.txt").write_bytes(b"touched")  # a reuse keeps it, a new extraction would not
    extract_archive(copy, target)  # the same bytes under another path: reused
    assert (target / "a.txt").read_bytes() == b"touched"
    extract_archive(two, target)
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "b.txt"]
    assert not target.with_name("x.extracting").exists()


def test_an_extraction_marked_the_old_way_is_unpacked_again(tmp_path, capsys):
    archive = write_tar(tmp_path / "one.tar", {"a.txt": b"one"})
    target = tmp_path / "x"
    target.mkdir()
    (target / MARKER).write_text(str(tmp_path / "fixture.tar"))  # what extract_tar wrote
    (target / "stale.txt").write_bytes(b"from the fixture")
    extract_archive(archive, target)
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "a.txt"]
    assert "holds an extraction of" in capsys.readouterr().err


def test_a_damaged_archive_leaves_nothing_half_unpacked(tmp_path):
    good = io.BytesIO()
    with tarfile.open(fileobj=good, mode="w") as tar:
        info = tarfile.TarInfo("a.bin")
        info.size = 100_000
        tar.addfile(info, io.BytesIO(b"x" * 100_000))
    archive = tmp_path / "cut.tar"
    archive.write_bytes(good.getvalue()[:50_000])  # truncated inside its member
    with pytest.raises(CorruptDataError, match="cannot read"):
        extract_archive(archive, tmp_path / "x")
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.extracting").exists()
