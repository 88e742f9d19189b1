"""Faults in a dataset's data, found before a sweep records anything where that can be known,
else failing the run that meets them with a one-line data reason (issue 36, data items):

1. labels or bias labels outside the dataset's classes (a plugin's ``load``, a prepared store);
3. a prepared file whose bytes changed after its build (same size);
4. a dataset with no data and no way to get it (Colored MNIST offline: one error, one hint).

Item 2 (a data option outside its declared range) is in ``test_data_options.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import http.server
import os
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from support.fixture_data import FixtureData

from debias_bench.cli import main
from debias_bench.data.integrity import VERIFIED_CACHE, BadDataError
from debias_bench.datasets.cmnist import ColoredMNIST
from debias_bench.runs.store import RunStore

# ------------------------------------------------------------------ 1: labels out of range
PLUGIN = textwrap.dedent(
    '''
    """A dataset plugin with ten classes whose loader gives one split a label of 10."""
    import os

    import torch

    from debias_bench.data.contract import Split, Splits
    from debias_bench.data.spec import DatasetSpec
    from debias_bench.data.family import DatasetFamily
    from debias_bench.registry import register_dataset

    BAD_SPLIT, BAD_FIELD = os.environ["BAD_SPLIT"], os.environ["BAD_FIELD"]


    def _split(name, n, seed):
        g = torch.Generator().manual_seed(seed)
        labels = torch.arange(n) % 10
        biases = labels.clone()
        if name == BAD_SPLIT:  # items 7 and 13: the value 10, one past the last class
            (labels if BAD_FIELD == "label" else biases)[[7, 13]] = 10
        images = (torch.rand(n, 4, 4, 3, generator=g) * 255).to(torch.uint8)
        return Split(images, labels, biases, name=name)


    @register_dataset("ten_classes_ds", display_name="Ten classes", kind="real")
    class TenClasses(DatasetFamily):
        spec = DatasetSpec(
            name="ten_classes_ds", num_classes=10, num_biases=10, ratios=(5.0,),
            image_size=(4, 4), channels=3, backbone="mlp", test_kind="conflicting",
        )

        def prepare(self, ratios=None, force=False):
            return self.data_root

        def load(self, ratio):
            self.check_ratio(ratio)
            return Splits(_split("train", 80, 1), _split("valid", 40, 2), _split("test", 40, 3))
    '''
)

TINY_RUN = ["--methods", "vanilla", "--seeds", "0", "--device", "cpu"]
TINY_RUN += ["--set", "steps=4", "--set", "eval_every=2", "--set", "batch_size=16"]


@pytest.mark.parametrize(
    "split, field, what",
    [
        ("test", "label", "2 test labels outside 0..9"),  # was: done, with a wrong accuracy
        ("valid", "label", "2 valid labels outside 0..9"),
        ("train", "label", "2 train labels outside 0..9"),  # was: IndexError, a traceback
        ("test", "bias", "2 test bias labels outside 0..9"),
    ],
)
def test_a_plugin_label_outside_its_classes_fails_the_run_naming_the_split(
    tmp_path, monkeypatch, capsys, registries_restored, split, field, what
):
    plugin = tmp_path / "ten_classes_ds.py"
    plugin.write_text(PLUGIN)
    monkeypatch.setenv("BENCH_PLUGINS", str(plugin))
    monkeypatch.setenv("BAD_SPLIT", split)
    monkeypatch.setenv("BAD_FIELD", field)
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))
    out = tmp_path / "runs"
    code = main(["run", *TINY_RUN, "--datasets", "ten_classes_ds", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err and "IndexError" not in err, err
    (run,) = RunStore(out).runs()
    status = run.status()
    assert status["state"] == "failed" and status["reason"] == "bad data", status
    error = status["error"]
    assert error.startswith(f"ten_classes_ds at 5%: {what} (first: item 7, value 10)"), error
    assert "\n" not in error and status.get("traceback_tail") is None
    assert run.result() is None  # never a done run with a wrong accuracy


@pytest.fixture
def cmnist(tmp_path) -> FixtureData[ColoredMNIST]:
    """Colored MNIST built from tiny idx files (28-px, read into memory)."""
    return FixtureData.prepared(ColoredMNIST, tmp_path)


class NineDigits(ColoredMNIST):
    """Colored MNIST's prepared store read under a spec of nine classes: the digit 9 is out of
    range (a store built before its spec changed). Not registered: it reads cmnist's folder."""

    spec = dataclasses.replace(ColoredMNIST.spec, num_classes=9)


def test_a_prepared_store_with_labels_outside_the_spec_is_refused_before_any_run(cmnist):
    family = NineDigits(cmnist.raw, cmnist.data, **cmnist.options)
    changed, problems = family.content_problems([1.0])
    assert changed == []  # its files are what its manifest says: only the spec disagrees
    labels = np.load(family.folder / "test" / "attrs.npy")[:, 0]
    first, count = int(np.flatnonzero(labels == 9)[0]), int((labels == 9).sum())
    expected = f"{family.folder / 'test'}: {count} test labels outside 0..8 (first: item {first}"
    assert any(p.startswith(expected) and p.endswith("value 9)") for p in problems), problems
    assert any("1pct/train: " in p for p in problems) and any("/valid: " in p for p in problems)
    # and the run that would read it anyway fails with the same words, as bad data
    with pytest.raises(BadDataError, match=r"cmnist at 1%: \d+ train labels outside 0\.\.8"):
        family.load(1.0)
    narrow = ColoredMNIST(cmnist.raw, cmnist.data, **cmnist.options)
    assert narrow.content_problems([1.0]) == ([], [])


def test_bench_run_refuses_such_a_store_with_exit_2_naming_the_split(
    tmp_path, monkeypatch, capsys, registries_restored
):
    """The same through `bench run`: a registered family prepared under a spec of ten classes,
    whose spec then says nine (a plugin edited after its data was built)."""
    from debias_bench.registry import DATASETS

    @DATASETS.register("shrunk_digits", display_name="Shrunk digits", kind="synthetic")
    class Shrunk(ColoredMNIST):
        spec = dataclasses.replace(ColoredMNIST.spec, name="shrunk_digits")
        train_sizes = ColoredMNIST.train_sizes  # its own facts, here cmnist's (issue 39.12)
        valid_split = ColoredMNIST.valid_split

    built = FixtureData.prepared(Shrunk, tmp_path)
    monkeypatch.setattr(Shrunk, "spec", dataclasses.replace(Shrunk.spec, num_classes=9))
    monkeypatch.setenv("BENCH_RAW_ROOT", str(built.raw))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(built.data))
    out = tmp_path / "runs"
    argv = ["run", *TINY_RUN, "--datasets", "shrunk_digits", "--ratios", "1", "--out", str(out)]
    capsys.readouterr()  # the build's output
    assert main([*argv, *built.option_args()]) == 2
    err = capsys.readouterr().err
    err = err[err.index("error: ") :]  # after the note on vanilla's settings
    head = "shrunk_digits: the prepared data holds labels outside its spec (9 classes, 10 bias"
    assert err.startswith("error: data not usable; nothing was started:\n  " + head), err
    assert "1pct/train: " in err and "train labels outside 0..8 (first: item " in err, err
    assert "hint: fix the dataset's build or its spec, then `bench data prepare " in err
    assert not out.exists()


def test_a_build_whose_labels_are_outside_the_spec_is_never_swapped_in(cmnist):
    family = NineDigits(cmnist.raw, cmnist.data, **cmnist.options)
    before = ColoredMNIST(cmnist.raw, cmnist.data, **cmnist.options).fingerprint()
    bad = r"cmnist: \S+\.building/0\.5pct/train: \d+ train labels outside 0\.\.8 \(first: item"
    with pytest.raises(BadDataError, match=bad):
        family.prepare(force=True)
    assert ColoredMNIST(cmnist.raw, cmnist.data, **cmnist.options).fingerprint() == before
    assert not list(family.folder.parent.glob("*.building"))


# ------------------------------------------------------------------ 3: a changed prepared file
def _flip_a_byte(path: Path, keep_mtime: bool = False) -> None:
    """Change one byte of ``path`` in place (same size); optionally put its mtime back."""
    stat = path.stat()
    with open(path, "r+b") as handle:
        handle.seek(stat.st_size - 1)
        byte = handle.read(1)
        handle.seek(stat.st_size - 1)
        handle.write(bytes([255 - byte[0]]))
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _run_argv(built: FixtureData[ColoredMNIST], out: Path) -> list[str]:
    argv = ["run", *TINY_RUN, "--datasets", "cmnist", "--ratios", "1", "--out", str(out)]
    return [*argv, *built.option_args()]


@pytest.fixture
def roots(cmnist, monkeypatch) -> FixtureData[ColoredMNIST]:
    monkeypatch.setenv("BENCH_RAW_ROOT", str(cmnist.raw))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(cmnist.data))
    return cmnist


def test_a_changed_prepared_file_is_refused_up_front_and_the_fix_lets_the_same_run_go(
    roots, tmp_path, capsys
):
    family = roots.family()
    target = family.folder / "1pct" / "train" / "images.npy"
    _flip_a_byte(target)
    out = tmp_path / "runs"
    capsys.readouterr()
    assert main(_run_argv(roots, out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data not usable; nothing was started:"), err
    assert "cmnist: the prepared data was changed after it was built: " in err
    assert f"{target} does not match its checksum" in err and "Traceback" not in err
    assert err.rstrip().endswith(f"hint: rebuild it with `{family.repair_command()}`"), err
    assert "--data-option valid_size=" in family.repair_command()
    assert not out.exists()  # no run folder: nothing for --retry-failed to hold back
    # other ratios read other training files: a grid without 1 % is not held up
    assert family.content_problems([2.0]) == ([], [])

    assert roots.prepare_command("--force") == 0  # the hinted fix
    capsys.readouterr()
    assert main(_run_argv(roots, out)) == 0  # the same command now trains it
    (run,) = RunStore(out).runs()
    assert run.status()["state"] == "done"


def test_the_up_front_check_costs_a_stat_per_file_while_the_stamps_hold(roots, monkeypatch):
    """Its stamps are written by the build (which hashed every file): no hashing up front,
    and a store without stamps (prepared by an older bench) is hashed once, then stamped."""
    from debias_bench.data import integrity

    family = roots.family()
    calls: list[Path] = []
    real = integrity.sha256
    monkeypatch.setattr(integrity, "sha256", lambda p: calls.append(p) or real(p))
    assert family.content_problems(family.spec.ratios) == ([], [])
    assert calls == []
    (family.folder / VERIFIED_CACHE).unlink()
    assert family.content_problems(family.spec.ratios) == ([], [])
    assert len(calls) == 12  # 4 training splits + valid + test, x (images, attrs)
    calls.clear()
    assert family.content_problems(family.spec.ratios) == ([], [])
    assert calls == []


def test_a_store_without_stamps_is_hashed_up_front_and_a_change_is_caught(roots, tmp_path, capsys):
    family = roots.family()
    (family.folder / VERIFIED_CACHE).unlink()
    target = family.folder / "test" / "attrs.npy"
    _flip_a_byte(target, keep_mtime=True)
    assert main(_run_argv(roots, tmp_path / "runs")) == 2
    assert f"{target} does not match its checksum" in capsys.readouterr().err


def test_a_change_that_keeps_size_and_mtime_still_fails_its_run_as_bad_data(
    roots, tmp_path, capsys
):
    """What gets past the up-front stamps (a write that puts the old mtime back) is caught
    when the run hashes what it reads (every time for the in-memory sets): failed, bad data."""
    family = roots.family()
    target = family.folder / "test" / "images.npy"
    _flip_a_byte(target, keep_mtime=True)
    out = tmp_path / "runs"
    assert main(_run_argv(roots, out)) == 1
    (run,) = RunStore(out).runs()
    status = run.status()
    assert status["state"] == "failed" and status["reason"] == "bad data", status
    assert status["error"].startswith(f"{target} does not match its checksum")
    assert "Traceback" not in capsys.readouterr().err


# ------------------------------------------------------------------ 4: no data, no way to get it
class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A folder served on 127.0.0.1 (never the network), made Colored MNIST's only mirror."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    source = dataclasses.replace(ColoredMNIST.raw_source, mirrors=(url,), gz_md5={})
    monkeypatch.setattr(ColoredMNIST, "raw_source", source)
    yield folder
    server.shutdown()
    server.server_close()


def test_colored_mnist_offline_is_one_error_before_any_run_folder(
    mirror, tmp_path, monkeypatch, capsys
):
    raw, data, out = tmp_path / "empty", tmp_path / "data", tmp_path / "runs"
    raw.mkdir()
    monkeypatch.setenv("BENCH_RAW_ROOT", str(raw))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(data))
    argv = ["run", "--methods", "vanilla", "--datasets", "cmnist", "--preset", "smoke"]
    assert main([*argv, "--device", "cpu", "--out", str(out)]) == 2  # its 4 ratios
    err = capsys.readouterr().err
    assert err.count("downloading ") == 1, err  # tried once, not once per run
    err = err[err.index("error: ") :]
    assert err.startswith("error: data missing; nothing was started:"), err
    for looked in (raw / "mnist", raw / "MNIST" / "raw", data / "downloads" / "mnist"):
        assert f"      {looked}\n" in err, err
    assert "download failed" in err and "`bench data prepare cmnist" in err
    assert err.count("hint:") == 1 and "Traceback" not in err
    assert not out.exists()  # was: 4 failed run folders
    assert not list(data.rglob("manifest.json")) and not (data / "cmnist" / "v1").exists()


def test_colored_mnist_fetches_its_sources_once_up_front_then_runs(
    mirror, tmp_path, monkeypatch, capsys
):
    """The documented first use: no raw sources, a mirror that serves them; the sweep's
    up-front check downloads them (once, not once per run) and the runs train."""
    options = ColoredMNIST(tmp_path / "made", tmp_path / "unused").write_fixture()
    for path in (tmp_path / "made" / "mnist").iterdir():
        (mirror / path.name).write_bytes(path.read_bytes())
    raw, data, out = tmp_path / "empty", tmp_path / "data", tmp_path / "runs"
    raw.mkdir()
    monkeypatch.setenv("BENCH_RAW_ROOT", str(raw))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(data))
    argv = ["run", *TINY_RUN, "--datasets", "cmnist", "--ratios", "1,5", "--out", str(out)]
    assert main([*argv, "--data-option", f"valid_size={options['valid_size']}"]) == 0
    err = capsys.readouterr().err
    assert err.count("downloading ") == 4, err  # the four idx files, once
    assert sorted(p.name for p in (data / "downloads" / "mnist").iterdir()) == sorted(
        p.name for p in mirror.iterdir()
    )
    assert {r.status()["state"] for r in RunStore(out).runs()} == {"done"}


def test_a_dataset_without_data_gets_one_hint(tmp_path, monkeypatch, capsys):
    """Issue 39, item 7: BFFHQ without data said how to get it three times over."""
    monkeypatch.setenv("BENCH_RAW_ROOT", str(tmp_path / "empty"))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))
    out = tmp_path / "runs"
    assert main(["run", "--methods", "all", "--datasets", "bffhq", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data missing; nothing was started:\n  bffhq: "), err
    assert str(tmp_path / "empty" / "bffhq") in err
    assert err.count("hint:") == 1, err
    (hint,) = [line for line in err.splitlines() if "hint:" in line]
    assert hint.count("bench data download bffhq") == 1
    assert hint.rstrip().endswith("then `bench data prepare bffhq`"), hint
    assert "get it with" not in err and "once the raw sources are there" not in err
    assert not out.exists()
