"""Issue 23, bad input: one `error:` naming the problem and the fix, exit code 2, no traceback,
and nothing created on disk (no run folder, no --out, no data folder). Every case runs the CLI
in this process (`main`), on the toy dataset of conftest (no raw data, no training), except the
broken-torchvision case, which needs a fresh interpreter."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.planted import finish, plant

from debias_bench.analysis.regression import load_baseline
from debias_bench.analysis.tuning import TunedCell, TunedFile, write_tuned
from debias_bench.cli import main
from debias_bench.config.hparams import ENGINE_HPARAMS, MAX_BATCH, MAX_EPOCHS
from debias_bench.config.run_config import make_config
from debias_bench.errors import ConfigError
from debias_bench.launchers.preflight import check_weights
from debias_bench.runs.store import RunStore

REPO = Path(__file__).resolve().parents[2]
TOY = ["--methods", "vanilla", "--datasets", "toy", "--ratios", "5", "--device", "cpu"]
TOY += ["--set", "steps=2"]  # were a check to fail, the run it lets through is short


@pytest.fixture
def bench(tmp_path, monkeypatch, capsys):
    """`bench ARGS` in this process with its data under ``tmp_path``: (exit code, out, err)."""
    monkeypatch.setenv("BENCH_RAW_ROOT", str(tmp_path / "raw"))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.delenv("BENCH_PLUGINS", raising=False)

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return call


def refused(result: tuple[int, str, str], *needles: str) -> str:
    """Exit 2 with one `error:` that holds every needle, and no traceback."""
    code, out, err = result
    assert code == 2, (code, out, err)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err  # (grid notes may come before it)
    assert "Traceback" not in err + out, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def tree(root: Path) -> set[str]:
    """Everything under ``root`` (to show that a refused command created nothing)."""
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


# --------------------------------------------------------------- 1: no run store at --out
@pytest.mark.parametrize("command", ["status", "report"])
def test_reading_a_missing_run_store_is_an_error_naming_it(bench, tmp_path, command):
    missing = tmp_path / "no-such-store"
    err = refused(bench(command, "--out", str(missing)), f"no run store at {missing}")
    assert f"`bench run --out {missing} ...` creates it" in err
    assert not missing.exists()


@pytest.mark.parametrize("command", ["status", "report"])
def test_a_folder_that_is_no_run_store_is_refused(bench, tmp_path, command):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"jpeg")
    (folder / "2024").mkdir()
    (folder / "2024" / "a.jpg").write_bytes(b"jpeg")
    before = tree(folder)
    refused(bench(command, "--out", str(folder)), f"{folder} is not a run store", "holiday.jpg")
    refused(bench(command, "--out", str(folder / "holiday.jpg")), "is a file, not a run store")
    assert tree(folder) == before


def test_an_empty_run_store_is_no_runs_yet_with_exit_0(bench, tmp_path):
    """Decided: an existing empty directory is an empty store (a sweep creates --out before
    it plans its runs): `no runs`, exit 0, for status and report alike."""
    store = tmp_path / "runs"
    store.mkdir()
    code, out, _ = bench("status", "--out", str(store))
    assert code == 0 and f"no runs under {store} yet" in out
    code, out, err = bench("report", "--out", str(store))
    assert code == 0 and f"no runs under {store} yet" in err and "no runs" in out
    assert tree(store) == set()


def test_regress_check_on_a_missing_store_is_the_same_error(bench, tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(_baseline({"toy/vanilla/r5/s0/official": _cell()})))
    refused(
        bench("regress", "check", "--out", str(tmp_path / "nope"), "--baseline", str(baseline)),
        "no run store at",
    )


# --------------------------------------------------------------- 2: numeric flags
NUMERIC = [
    (["--grace", "-1"], "argument --grace: must be float >= 0 and <= 3600, not '-1'"),
    (["--grace", "nan"], "argument --grace: must be float >= 0"),
    (["--max-attempts", "0"], "argument --max-attempts: must be int >= 1 and <= 100, not '0'"),
    (["--timeout", "-5"], "bad --timeout '-5'"),
    (["--timeout", "inf"], "bad --timeout 'inf'"),
    (["--workers", "0"], "argument --workers: must be int >= 1"),
    (["--workers", "-3"], "argument --workers: must be int >= 1"),
    (["--jobs-per-gpu", "0"], "argument --jobs-per-gpu: must be int >= 1"),
    (["--array-parallelism", "0"], "argument --array-parallelism: must be int >= 1"),
    (["--data-seed", "-1"], "argument --data-seed: must be int >= 0 and <= 4294967295"),
    (["--epochs", "1000000000"], "--epochs: epochs=1000000000 is not valid (epochs is int "),
    (["--epochs", "0"], "--epochs: epochs=0 is not valid"),
    (["--epochs", "-2"], "--epochs: epochs=-2 is not valid"),
    (["--epochs", "2.5"], "--epochs: epochs=2.5 is not valid"),
    (["--set", "epochs=1000000000"], "epochs=1000000000 is not valid (epochs is int >= 1 and "),
    (["--set", "batch_size=100000000"], f"batch_size is int >= 1 and <= {MAX_BATCH}"),
    (["--set", "steps=1e12"], "steps=1000000000000.0 is not valid"),
]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize(("extra", "message"), NUMERIC, ids=[" ".join(c[0]) for c in NUMERIC])
def test_numeric_flags_out_of_range_are_refused(bench, tmp_path, extra, message, dry_run):
    out = tmp_path / "runs"
    args = ["run", *TOY, "--out", str(out), *extra] + (["--dry-run"] if dry_run else [])
    refused(bench(*args), message)
    assert not out.exists() and not (tmp_path / "data").exists()


def test_the_range_is_stated_with_the_flag_in_one_line(bench, tmp_path):
    err = refused(bench("run", *TOY, "--out", str(tmp_path / "r"), "--grace", "-1"))
    assert err.splitlines()[0] == (
        "error: bench run: argument --grace: must be float >= 0 and <= 3600, not '-1'"
    )
    assert err.count("\n") == 2 and "usage:" not in err  # the error and its hint only


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tune", *TOY, "--trials", "0"], "argument --trials: must be int >= 1"),
        (["tune", *TOY, "--sampler-seed", "-1"], "argument --sampler-seed: must be int >= 0"),
        (["tune", *TOY, "--epochs", "99999"], "epochs=99999 is not valid"),
        (["regress", "check", "--tolerance", "-1"], "argument --tolerance: must be float >= 0"),
        (["regress", "check", "--noise-z", "nan"], "argument --noise-z: must be float >= 0"),
    ],
)
def test_other_commands_share_the_range_checks(bench, tmp_path, argv, message):
    out = tmp_path / "runs"
    args = [*argv, "--out", str(out)]
    if argv[0] == "regress":
        args += ["--baseline", str(tmp_path / "b.json")]
    refused(bench(*args), message)
    assert not out.exists()


def test_lengths_and_batch_sizes_declare_a_sane_maximum():
    table = {p.name: p for p in ENGINE_HPARAMS}
    assert table["epochs"].high == MAX_EPOCHS and table["steps"].high is not None
    assert table["batch_size"].high == MAX_BATCH == table["eval_batch_size"].high
    assert table["epochs"].describe() == f"int >= 1 and <= {MAX_EPOCHS}"
    assert table["epochs"].parse(200, "x") == 200  # the paper's length stays valid


def test_valid_values_still_pass(bench, tmp_path):
    code, out, err = bench(
        "run", *TOY, "--out", str(tmp_path / "runs"), "--dry-run", "--epochs", "200",
        "--grace", "0", "--max-attempts", "1", "--timeout", "30m", "--launcher", "local",
        "--workers", "2",
    )  # fmt: skip
    assert code == 0 and out.startswith("todo"), err


# --------------------------------------------------------------- 3: --out no file system takes
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_an_out_component_over_255_bytes_is_refused_before_anything_exists(
    bench, tmp_path, dry_run
):
    out = tmp_path / "new" / ("a" * 300) / "runs"
    args = ["run", *TOY, "--out", str(out)] + (["--dry-run"] if dry_run else [])
    refused(bench(*args), "is 300 bytes long, more than the 255", "give --out a path")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("command", ["status", "report"])
def test_readers_refuse_an_over_long_out_too(bench, tmp_path, command):
    refused(bench(command, "--out", str(tmp_path / ("b" * 300))), "is 300 bytes long")


def test_an_out_that_cannot_be_created_leaves_nothing(bench, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    refused(bench("run", *TOY, "--out", str(blocker / "x" / "runs")), "is not writable")
    assert tree(tmp_path) == {"a_file"}


@pytest.mark.parametrize(
    "argv",
    [
        ["run", *TOY],
        ["run", *TOY, "--dry-run"],
        ["status"],
        ["report"],
        ["regress", "check", "--baseline", "baseline.json"],
        ["regress", "record", "-o", "baseline.json"],
        ["track", "export", "--to", "tensorboard"],
    ],
    ids=lambda argv: " ".join(argv[:2]) + (" --dry-run" if "--dry-run" in argv else ""),
)
@pytest.mark.parametrize("value", ["", " "], ids=["empty", "blank"])
def test_an_empty_out_is_refused_not_taken_for_the_working_directory(
    bench, tmp_path, monkeypatch, argv, value
):
    """`--out ""` was the working directory (`Path("") == Path(".")`): `bench run` filled it
    with run folders. One line, before the command does anything."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    err = refused(bench(*argv, "--out", value), f"error: --out must name a folder, not {value!r}")
    assert len(err.strip().splitlines()) == 1, err
    assert tree(work) == set()


# --------------------------------------------------------------- 4: data root not writable
def test_a_data_root_that_cannot_be_written_is_named_before_any_run(bench, tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("BENCH_DATA_ROOT", str(blocker / "data"))
    out = tmp_path / "runs"
    err = refused(bench("run", *TOY, "--out", str(out)), f"{blocker} is a file", "BENCH_DATA_ROOT")
    assert "data folder" in err
    assert not out.exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc (read-only)")
def test_a_read_only_home_is_named_with_the_env_var_to_set(bench, tmp_path, monkeypatch):
    """The default data root lives under $HOME; /proc refuses writes even to root."""
    monkeypatch.delenv("BENCH_DATA_ROOT")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/proc/no-home")
    out = tmp_path / "runs"
    refused(
        bench("run", *TOY, "--out", str(out)),
        "/proc/no-home/.cache/debias-bench/data/toy is not writable",
        "$BENCH_DATA_ROOT",
    )
    assert not out.exists()


# --------------------------------------------------------------- 5: tuned.yaml
def _tuned(**change) -> dict:
    cell = TunedCell(
        method="vanilla",
        dataset="toy",
        ratio=5.0,
        hparams={"lr": 0.002},
        trial=1,
        valid_accuracy=47.2,
        trials=[{"trial": 0, "hparams": {"lr": 0.001}, "valid_accuracy": 42.5, "runs": ["a"]}],
        runs=["b"],
    )
    tuned = TunedFile("official", "paper", "best_valid", 2, [0], [1], 0, {}, [cell])
    return tuned, change


def _write_tuned(path: Path, edit=None) -> Path:
    tuned, _ = _tuned()
    write_tuned(path, tuned)
    if edit is not None:
        data = yaml.safe_load(path.read_text())
        edit(data)
        path.write_text(yaml.safe_dump(data))
    return path


def _set(key, value):
    return lambda d: d["cells"][0].__setitem__(key, value)


TUNED_CASES = [
    ("hparams-null", _set("hparams", None), [], "hparams is null, not a mapping"),
    ("hparams-list", _set("hparams", [1, 2]), [], "hparams is list, not a mapping"),
    ("fixed-null", lambda d: d.update(fixed=None), [], "fixed is null, not a mapping"),
    ("trial-str", _set("trial", "one"), [], "trial is 'one', not a whole number"),
    ("runs-str", _set("runs", "b"), [], "runs is 'b', not a list of run ids"),
    ("value-type", _set("hparams", {"lr": "fast"}), [], "tuned: lr='fast' is not valid"),
    ("duplicate", lambda d: d["cells"].append(dict(d["cells"][0])), [], "repeats cells[0]"),
    ("protocol", lambda d: None, ["--protocol", "clean"], "tuned under protocol 'official'"),
    ("missing-cell", lambda d: None, ["--ratios", "5,20"], "no tuned values for 1 cell(s)"),
]


@pytest.mark.parametrize(
    ("edit", "extra", "message"), [c[1:] for c in TUNED_CASES], ids=[c[0] for c in TUNED_CASES]
)
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_a_bad_tuned_file_is_one_error(bench, tmp_path, edit, extra, message, dry_run):
    path = _write_tuned(tmp_path / "tuned.yaml", edit)
    out = tmp_path / "runs"
    args = ["run", *TOY, "--hparams", str(path), "--out", str(out), *extra]
    refused(bench(*args + (["--dry-run"] if dry_run else [])), message)
    assert not out.exists()


def test_a_sound_tuned_file_passes_and_a_missing_cell_says_how_to_fix(bench, tmp_path):
    path = _write_tuned(tmp_path / "tuned.yaml")
    code, out, err = bench("run", *TOY, "--hparams", str(path), "--out", str(tmp_path / "r"),
                           "--dry-run")  # fmt: skip
    assert code == 0 and out.startswith("todo"), err
    err = refused(
        bench("run", *TOY, "--ratios", "5,20", "--hparams", str(path), "--dry-run"),
        "vanilla toy r20",
        "(it has: vanilla toy r5)",
    )
    assert "narrow --methods/--datasets/--ratios to the tuned cells" in err
    code, _, err = bench("run", *TOY, "--preset", "ci", "--hparams", str(path), "--dry-run")
    assert code == 0 and "tuned under preset 'paper'" in err  # another preset: a note


def test_report_refuses_a_malformed_tuned_file_in_the_store(bench, tmp_path):
    store = RunStore(tmp_path / "runs")
    finish(plant(store))
    _write_tuned(store.root / "tuned.yaml", _set("hparams", None))
    refused(bench("report", "--out", str(store.root)), "hparams is null, not a mapping")


# --------------------------------------------------------------- 6: regress baselines
def _cell(**change) -> dict:
    cell = {
        "dataset": "toy",
        "method": "vanilla",
        "ratio": 5.0,
        "seed": 0,
        "protocol": "official",
        "preset": "paper",
        "run_id": "x",
        "metrics": {"last.test.accuracy": 50.0, "best_valid.test.accuracy": 50.0},
        "counts": {"last.test.accuracy": 100, "best_valid.test.accuracy": 100},
    }
    cell.update(change)
    return cell


def _baseline(cells) -> dict:
    return {"format": 1, "environment": {}, "tracked": [], "cells": cells}


KEY = "toy/vanilla/r5/s0/official"
BASELINES = [
    ("nan", {KEY: _cell(metrics={"last.test.accuracy": math.nan})}, "is nan, not a finite"),
    ("inf", {KEY: _cell(metrics={"last.test.accuracy": math.inf})}, "is inf, not a finite"),
    ("string", {KEY: _cell(metrics={"last.test.accuracy": "50"})}, "is '50', not a finite"),
    ("no-metrics", {KEY: _cell(metrics={})}, "no metrics"),
    ("metric-typo", {KEY: _cell(metrics={"last.tset.accuracy": 5.0})}, "unknown metric"),
    ("no-seed", {KEY: {k: v for k, v in _cell().items() if k != "seed"}}, "no seed"),
    ("cell-list", {KEY: [1, 2]}, "is list, not an object"),
    ("wrong-key", {"toy/vanilla/r5/s1/official": _cell()}, f"its fields say '{KEY}'"),
    ("empty", {}, "holds no cells: a check against it would check nothing"),
]


@pytest.mark.parametrize(
    ("cells", "message"), [b[1:] for b in BASELINES], ids=[b[0] for b in BASELINES]
)
def test_a_baseline_that_checks_nothing_or_is_malformed_is_exit_2(bench, tmp_path, cells, message):
    store = RunStore(tmp_path / "runs")
    finish(plant(store, protocol="official"))
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(_baseline(cells)))  # NaN and Infinity as Python writes them
    err = refused(
        bench("regress", "check", "--out", str(store.root), "--baseline", str(path)), message
    )
    assert "bench regress record" in err


def test_the_committed_baseline_is_valid():
    assert len(load_baseline(REPO / "tests" / "baselines" / "ci_preset.json")["cells"]) > 0


# --------------------------------------------------------------- 7: malformed metrics.jsonl
MALFORMED = ['{"epoch": 1}', '{"step": "x"}', "[1, 2]", '{"step": 3, "epoch": 1}',
             '{"step": 5, "epoch": 2, "test": 3, "nc": {"aligned": 1}}', "17", "null"]  # fmt: skip


def _metrics_store(root: Path) -> Path:
    """One finished run whose metrics.jsonl holds good NC records and malformed ones."""
    run = finish(plant(RunStore(root)))
    split = {"accuracy": 50.0, "aligned_accuracy": 90.0, "conflicting_accuracy": 40.0}
    nc = {g: {"nc1": 1.0, "nc2": 0.5, "nc3": 0.2} for g in ("all", "aligned", "conflicting")}
    lines = []
    for step in (10, 20):
        good = {"step": step, "epoch": step / 10, "valid": split, "test": split, "nc": nc}
        lines += [json.dumps(good), *MALFORMED]
    run.metrics_path.write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize("command", [["status"], ["status", "--failed"], ["report"]])
def test_malformed_metrics_records_never_break_status_or_report(bench, tmp_path, command):
    store = _metrics_store(tmp_path / "runs")
    code, _, err = bench(*command, "--out", str(store))
    assert code == 0 and "Traceback" not in err, err


def test_malformed_metrics_records_are_skipped_by_analyze_nc(bench, tmp_path):
    store = _metrics_store(tmp_path / "runs")
    figure = tmp_path / "fig" / "nc.png"
    code, _, err = bench("analyze", "nc", "--out", str(store), "-o", str(figure))
    assert code == 0 and figure.is_file(), err


# --------------------------------------------------------------- 8: a broken torchvision
def test_a_torchvision_that_cannot_be_imported_stops_the_local_launcher_first(
    bench, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # `import torchvision` fails
    out = tmp_path / "runs"
    refused(
        bench("run", *TOY, "--launcher", "local", "--out", str(out)),
        "the local launcher's workers cannot import torchvision",
        "nothing was started",
        "--launcher inline",
    )
    assert not out.exists()


def test_a_broken_torchvision_through_the_console_script(tmp_path):
    """A torchvision that raises on import (a build for another torch): one error in the
    parent, before the warm workers would each die with a traceback."""
    fake = tmp_path / "site" / "torchvision"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n'
    )
    out = tmp_path / "runs"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(fake.parent), str(REPO / "tests")]),
        "BENCH_PLUGINS": "support.scripted",  # the scripted dataset, no raw data
        "BENCH_RAW_ROOT": str(tmp_path / "raw"),
        "BENCH_DATA_ROOT": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "debias_bench.cli", "run", "--methods", "vanilla",
         "--datasets", "scripted", "--ratios", "1", "--device", "cpu",
         "--launcher", "local", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot import torchvision: RuntimeError: operator torchvision::nms" in done.stderr
    assert not out.exists()


# ------------------------------------------------------- 9: pretrained weights not on disk
@pytest.mark.parametrize(
    ("method", "backbone_key", "backbone", "says"),
    [
        ("vanilla", "backbone", "resnet18_pretrained", "ResNet-18 weights not found"),
        ("vanilla", "backbone", "resnet18_etf", "ResNet-18 weights not found"),
        ("lff", "backbone", "resnet18_pretrained", "ResNet-18 weights not found"),
        ("vanilla", "backbone", "resnet50_pretrained", "ResNet-50 weights (resnet50-"),
    ],
)
def test_missing_pretrained_weights_stop_the_sweep_before_any_run(
    bench, tmp_path, monkeypatch, method, backbone_key, backbone, says
):
    """One error naming the backbone, each place looked at and the download command, before
    the run store exists (it was one failed run per cell); the weights put where torchvision
    caches them, the same check passes."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    for name in ("BENCH_RESNET18_WEIGHTS", "BENCH_RESNET50_WEIGHTS"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "runs"
    grid = [*TOY, "--methods", method, "--set", f"{backbone_key}={backbone}", "--out", str(out)]
    err = refused(
        bench("run", *grid), "pretrained weights missing; nothing was started", f"{backbone}: "
    )
    assert says in err and str(tmp_path / "torch" / "hub" / "checkpoints") in err
    assert "torchvision.models.resnet" in err  # the command that downloads them
    assert not out.exists()

    weights = tmp_path / "mine.pth"
    weights.write_bytes(b"")  # found is all the check asks; the run loads and verifies them
    found = {backbone_key: backbone, "pretrained_weights": str(weights)}
    check_weights([make_config(method, "toy", 5, 0, overrides=found)])
    with pytest.raises(ConfigError, match="pretrained weights missing"):
        check_weights([make_config(method, "toy", 5, 0, overrides={backbone_key: backbone})])
