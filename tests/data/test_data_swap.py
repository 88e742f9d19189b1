"""Prepared data is replaced atomically and "prepared" means complete (issue 23, item 4).

A `bench data prepare --force` killed during its swap used to leave a folder that a plain
`bench data prepare` called prepared with files missing. Each kill point of the build and the
swap is simulated (a ``BaseException`` nothing catches, as a kill) and, for two of them, done
for real (SIGKILL in a subprocess); afterwards a plain prepare recovers or rebuilds and the
data verifies. A prepared dataset missing a file is rebuilt by prepare and refused by a run,
the file named, exit 2, no traceback. Everything runs on Colored MNIST built from tiny idx
files (``write_fixture``), so the build is deterministic and fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from support.fixture_data import FixtureData

from debias_bench.cli import main
from debias_bench.data import folder_swap, split_store
from debias_bench.data.folder_swap import leftovers
from debias_bench.datasets.cmnist import ColoredMNIST
from debias_bench.errors import CorruptDataError


class Killed(BaseException):
    """A kill: no ``except Exception`` cleans up after it."""


@pytest.fixture
def built(tmp_path) -> FixtureData[ColoredMNIST]:
    """Colored MNIST from tiny idx files, prepared."""
    return FixtureData.prepared(ColoredMNIST, tmp_path)


def _assert_whole(built, fingerprint: str) -> None:
    """Complete, verified, nothing left beside it, the same bytes as before, loadable."""
    family = built.family()
    assert family.is_prepared()
    assert family.verify() == []
    assert leftovers(family.folder) == []
    assert family.fingerprint() == fingerprint
    family.load(1.0)


def _kill_in(monkeypatch, name: str, partial: bool = False) -> None:
    """Make the build step ``name`` (of ``split_store`` or ``folder_swap``) a kill
    (``partial``: the step removes one file of the old copy first, as an ``rmtree`` cut
    short)."""

    def killed(path, *args):
        if partial:
            next(p for p in path.rglob("*.npy")).unlink()
        raise Killed(name)

    module = split_store if hasattr(split_store, name) else folder_swap
    monkeypatch.setattr(module, name, killed)


# (step killed, what the kill leaves, what the plain prepare after it says)
KILL_POINTS = [
    ("_write_manifest", "the old data live, an unfinished .building", "removed"),
    ("_set_aside", "the old data live, a finished .building", "removed"),
    ("_put_in_place", "no live folder: the old one aside, the new one finished", "recovered"),
    ("_discard", "the new data live, the old one half deleted", "removed"),
]


@pytest.mark.parametrize(("step", "state", "note"), KILL_POINTS, ids=[k[0] for k in KILL_POINTS])
def test_a_forced_rebuild_killed_at_any_step_is_recovered_by_a_plain_prepare(
    built, monkeypatch, capsys, step, state, note
):
    family = built.family()
    fingerprint = family.fingerprint()
    with monkeypatch.context() as patch:
        _kill_in(patch, step, partial=step == "_discard")
        with pytest.raises(Killed):
            built.prepare_command("--force")
    names = sorted(p.name.split(".", 1)[1].split("-")[0] for p in leftovers(family.folder))
    if step == "_put_in_place":
        assert not family.folder.exists() and names == ["building", "old"], state
        assert not family.is_prepared()
    else:
        assert family.is_prepared() and names == (["old"] if step == "_discard" else ["building"])
    capsys.readouterr()
    assert built.prepare_command() == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("note:")] == [
        next(line for line in err.splitlines() if note in line)
    ], err  # one line saying what it did
    _assert_whole(built, fingerprint)


def test_a_first_build_killed_before_its_manifest_is_rebuilt_not_called_prepared(
    tmp_path, monkeypatch, capsys
):
    built = FixtureData.written(ColoredMNIST, tmp_path)
    with monkeypatch.context() as patch:
        _kill_in(patch, "_write_manifest")
        with pytest.raises(Killed):
            built.prepare_command()
    family = built.family()
    assert not family.folder.exists() and not family.is_prepared()
    assert built.prepare_command() == 0
    assert "removed what an interrupted build left" in capsys.readouterr().err
    assert family.verify() == [] and leftovers(family.folder) == []


def test_a_run_puts_back_a_dataset_left_half_swapped(built, monkeypatch, capsys):
    """The live name missing beside a complete copy: loading for a run recovers it too."""
    family = built.family()
    fingerprint = family.fingerprint()
    with monkeypatch.context() as patch:
        _kill_in(patch, "_put_in_place")
        with pytest.raises(Killed):
            built.prepare_command("--force")
    problems = built.family().verify()  # `bench data verify` says what is there
    assert any("is a complete copy left by an interrupted" in p for p in problems), problems
    capsys.readouterr()
    built.family().load(1.0)
    assert "recovered the complete copy" in capsys.readouterr().err
    _assert_whole(built, fingerprint)


def test_the_old_swap_killed_in_its_rmtree_is_recovered_from_the_finished_copy(built, capsys):
    """What the previous code left (rmtree of the live folder cut short, the finished
    ``.building`` beside it): the live folder has its manifest but not all its files."""
    family = built.family()
    fingerprint = family.fingerprint()
    staging = family.folder.with_name(family.folder.name + ".building")
    shutil.copytree(family.folder, staging)
    (family.folder / "test" / "images.npy").unlink()
    (family.folder / "1pct" / "train" / "attrs.npy").unlink()
    assert not family.is_prepared()
    assert built.prepare_command() == 0
    err = capsys.readouterr().err
    assert "recovered the complete copy " + staging.name in err and "rebuilding" not in err
    _assert_whole(built, fingerprint)


@pytest.mark.parametrize("victim", ["1pct/train/attrs.npy", "test/images.npy"])
def test_a_prepared_dataset_missing_a_file_is_never_called_prepared(
    built, monkeypatch, capsys, tmp_path, victim
):
    family = built.family()
    fingerprint = family.fingerprint()
    missing = family.folder / victim
    missing.unlink()
    assert not family.is_prepared()

    # a run refuses it before anything starts: the file and the repair named, exit 2
    monkeypatch.setenv("BENCH_RAW_ROOT", str(built.raw))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(built.data))
    out = tmp_path / "runs"
    argv = ["run", "--methods", "vanilla", "--datasets", "cmnist", "--ratios", "1"]
    argv += ["--preset", "smoke", "--device", "cpu", "--out", str(out)]
    argv += built.option_args()
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    assert str(missing) in err and "bench data prepare cmnist" in err, err
    assert not out.exists() or not any(out.iterdir())  # no run recorded

    # the loader a run uses says the same, and never rebuilds behind the run's back
    with pytest.raises(CorruptDataError) as error:
        built.family().load(1.0)
    assert str(missing) in str(error.value)
    assert "bench data prepare cmnist --force --data-option valid_size=" in str(error.value)
    assert not missing.exists()

    # a plain prepare says what is missing and rebuilds, to the same bytes
    assert built.prepare_command() == 0
    captured = capsys.readouterr()
    assert f"is incomplete: {missing} is missing; rebuilding it" in captured.err
    _assert_whole(built, fingerprint)


def test_a_truncated_file_is_not_prepared_either(built, capsys):
    family = built.family()
    target = family.folder / "5pct" / "train" / "images.npy"
    with open(target, "r+b") as handle:
        handle.truncate(target.stat().st_size // 2)
    assert not family.is_prepared()
    assert built.prepare_command() == 0
    assert "bytes, the manifest says" in capsys.readouterr().err
    assert family.verify() == []


def test_a_manifest_from_before_sizes_still_counts_and_still_catches_a_missing_file(built):
    """Stores prepared by the previous version have no ``sizes``: presence is checked (their
    contents by hash when read, as before); nothing asks for a rebuild."""
    family = built.family()
    manifest_path = family.folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["sizes"]
    manifest_path.write_text(json.dumps(manifest))
    assert family.is_prepared() and family.verify() == []
    built.family().load(2.0)
    (family.folder / "valid" / "attrs.npy").unlink()
    assert not family.is_prepared()
    with pytest.raises(CorruptDataError, match=r"valid/attrs\.npy is missing"):
        built.family().load(2.0)


def test_the_new_copy_is_checked_before_the_old_one_is_touched(built, monkeypatch):
    """A build whose manifest does not match its files is never swapped in."""
    family = built.family()
    before = family.fingerprint()
    real = split_store._write_manifest

    def wrong_sizes(folder, manifest):
        manifest["sizes"] = {rel: size + 1 for rel, size in manifest["sizes"].items()}
        real(folder, manifest)

    monkeypatch.setattr(split_store, "_write_manifest", wrong_sizes)
    with pytest.raises(CorruptDataError, match="failed its check"):
        family.prepare(force=True)
    monkeypatch.undo()
    _assert_whole(built, before)


# ------------------------------------------------------------------ real kills (SIGKILL)
KILLER = r"""
import os, shutil, signal, sys
from pathlib import Path
from debias_bench.cli import main

live = Path(sys.argv[1])
point = sys.argv[2]
real_rmtree, real_rename, real_replace = shutil.rmtree, os.rename, os.replace

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def rmtree(path, *args, **kwargs):  # deleting the old data: one file gone, then killed
    path = Path(path)
    if point == "delete" and (path == live or path.name.startswith(live.name + ".old-")):
        next(path.rglob("*.npy")).unlink()
        die()
    return real_rmtree(path, *args, **kwargs)

def swap(real):
    def rename(src, dst, *args, **kwargs):  # the first rename of the live folder or its new copy
        if point == "rename" and Path(dst).parent == live.parent and Path(src).is_dir():
            die()
        return real(src, dst, *args, **kwargs)
    return rename

shutil.rmtree = rmtree
os.rename, os.replace = swap(real_rename), swap(real_replace)
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("point", ["delete", "rename"])
def test_a_prepare_force_killed_for_real_during_its_swap(built, tmp_path, capsys, point):
    family = built.family()
    fingerprint = family.fingerprint()
    argv = built.prepare_argv("--force")
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(family.folder), point, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert killed.returncode == -9, killed.stderr
    assert built.prepare_command() == 0
    _assert_whole(built, fingerprint)
