"""`bench regress`: a baseline of a sweep, the check of a sweep against it, the `ci` preset."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import torch
from planted import finish, plant

from debias_bench.analysis.regression import compare, load_baseline, record, sweep_cells
from debias_bench.cli import main
from debias_bench.config.run_config import make_config
from debias_bench.errors import BenchError
from debias_bench.runs.provenance import config_json
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import DataPlace, load_data, train_run

REPO = Path(__file__).resolve().parents[1]
TOY_GRID = ["--methods", "vanilla,etf_debias", "--datasets", "toy", "--ratios", "20"]
TOY_GRID += ["--seeds", "0,1", "--protocol", "clean", "--device", "cpu"]
TOY_GRID += ["--set", "steps=8", "--set", "eval_every=4", "--set", "batch_size=64"]


@pytest.fixture(scope="module")
def toy_sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("regress") / "runs"
    root = out.parent
    code = main(["run", *TOY_GRID, "--out", str(out), "--raw-root", str(root / "raw")])
    assert code == 0
    return out


def _record(out: Path, path: Path) -> dict:
    assert main(["regress", "record", "--out", str(out), "-o", str(path)]) == 0
    return json.loads(path.read_text())


def _check(out: Path, baseline: Path, *extra: str) -> int:
    return main(["regress", "check", "--out", str(out), "--baseline", str(baseline), *extra])


def test_record_keeps_every_cell_with_its_environment(toy_sweep, tmp_path):
    baseline = _record(toy_sweep, tmp_path / "base.json")
    assert sorted(baseline["cells"]) == [
        f"toy/{m}/r20/s{s}/clean" for m in ("etf_debias", "vanilla") for s in (0, 1)
    ]
    cell = baseline["cells"]["toy/vanilla/r20/s0/clean"]
    assert set(cell["metrics"]) == set(baseline["tracked"])
    assert 0 <= cell["metrics"]["last.test.accuracy"] <= 100
    assert baseline["environment"]["torch"] == torch.__version__


def test_check_passes_against_its_own_record(toy_sweep, tmp_path, capsys):
    _record(toy_sweep, tmp_path / "base.json")
    assert _check(toy_sweep, tmp_path / "base.json") == 0
    assert "0 regressed, 0 missing" in capsys.readouterr().out


def test_a_drop_beyond_the_tolerance_fails_with_a_table(toy_sweep, tmp_path, capsys):
    baseline = _record(toy_sweep, tmp_path / "base.json")
    metrics = baseline["cells"]["toy/etf_debias/r20/s1/clean"]["metrics"]
    metrics["last.test.accuracy"] += 1.5  # the new sweep is now 1.5 points worse
    metrics["last.test.conflicting_accuracy"] += 0.5  # within tolerance
    higher = tmp_path / "higher.json"
    higher.write_text(json.dumps(baseline))
    capsys.readouterr()
    assert _check(toy_sweep, higher, "--noise-z", "0") == 1  # the plain tolerance
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "REGRESSED" in line)
    assert "toy/etf_debias/r20/s1/clean" in row and "last.test.accuracy" in row and "-1.50" in row
    assert "| changed" in out and "-0.50" in out  # reported, not failed
    assert "1 regressed, 0 missing" in out
    assert _check(toy_sweep, higher, "--tolerance", "2", "--noise-z", "0") == 0


def test_the_tolerance_grows_with_a_metric_s_sampling_noise(toy_sweep, tmp_path, capsys):
    """A drop within 3 standard errors of the metric's samples is drift, not a regression
    (another CPU takes another rounding path); a larger one fails."""
    baseline = _record(toy_sweep, tmp_path / "base.json")
    cell = baseline["cells"]["toy/vanilla/r20/s0/clean"]
    key = "last.test.accuracy"
    p, n = cell["metrics"][key], cell["counts"][key]
    assert n == 128  # the toy test split
    se = 100 * math.sqrt(p / 100 * (1 - p / 100) / n)
    for shift, code in ((2.5 * se, 0), (3.5 * se, 1)):
        cell["metrics"][key] = p + shift
        path = tmp_path / f"shift{shift:.1f}.json"
        path.write_text(json.dumps(baseline))
        assert _check(toy_sweep, path) == code, shift
    assert "3 standard errors" in capsys.readouterr().out


def test_a_missing_cell_fails(toy_sweep, tmp_path, capsys):
    baseline = _record(toy_sweep, tmp_path / "base.json")
    extra = dict(baseline["cells"]["toy/vanilla/r20/s0/clean"], seed=7)
    baseline["cells"]["toy/vanilla/r20/s7/clean"] = extra
    path = tmp_path / "more.json"
    path.write_text(json.dumps(baseline))
    capsys.readouterr()
    assert _check(toy_sweep, path) == 1
    out = capsys.readouterr().out
    assert "MISSING" in out and "toy/vanilla/r20/s7/clean" in out and "1 missing" in out


def test_improvements_and_new_cells_pass_and_are_reported(toy_sweep, tmp_path):
    baseline = record(toy_sweep)
    baseline["cells"]["toy/vanilla/r20/s0/clean"]["metrics"]["last.test.accuracy"] -= 5
    dropped = baseline["cells"].pop("toy/vanilla/r20/s1/clean")
    comparison = compare(baseline, sweep_cells(toy_sweep)[0], noise_z=0)
    assert not comparison.failed
    assert comparison.count("improved") == 1 and comparison.count("new") == 1
    assert dropped["run_id"].startswith("toy_vanilla_r20_s1_")


def test_unfinished_runs_are_refused_unless_allowed(toy_sweep, tmp_path):
    out = tmp_path / "runs"
    store = RunStore(out)
    config = make_config("vanilla", "toy", 20, 0, protocol="clean", overrides={"steps": 4})
    store.run(config.run_id).plan(config_json(config))
    with pytest.raises(BenchError, match="not finished"):
        record(out)
    with pytest.raises(BenchError, match="no finished run"):
        record(out, allow_unfinished=True)


def test_bad_baselines_are_named(toy_sweep, tmp_path):
    with pytest.raises(BenchError, match=r"no baseline at .*nope\.json"):
        load_baseline(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text('{"cells": {}}')
    with pytest.raises(BenchError, match=r"bad\.json is not a debias-bench baseline"):
        load_baseline(tmp_path / "bad.json")
    with pytest.raises(BenchError, match="no run store"):
        sweep_cells(tmp_path / "absent")


def test_record_refuses_runs_without_image_counts(tmp_path):
    """Results that do not say how many images each accuracy was measured on (planted here
    as an older bench wrote them) would make a baseline every check refuses: refused now."""
    store = RunStore(tmp_path / "runs")
    finish(plant(store, protocol="clean"))
    with pytest.raises(BenchError, match="do not make a baseline a check can use: cell 'toy/"):
        record(store.root)


def test_the_noise_term_uses_the_run_s_counts_not_the_baseline_s(toy_sweep, tmp_path, capsys):
    """A baseline count edited down (1 image: a noise term of tens of points) cannot hide a
    drop: the noise is that of the images the new run measured (128), and the note says the
    counts differ."""
    baseline = _record(toy_sweep, tmp_path / "base.json")
    cell = baseline["cells"]["toy/vanilla/r20/s0/clean"]
    key = "last.test.accuracy"
    p, n = cell["metrics"][key], cell["counts"][key]
    assert n == 128
    se = 100 * math.sqrt(p / 100 * (1 - p / 100) / n)
    cell["metrics"][key], cell["counts"][key] = p + 3.5 * se, 1
    path = tmp_path / "one.json"
    path.write_text(json.dumps(baseline))
    capsys.readouterr()
    assert _check(toy_sweep, path) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "REGRESSED" in line)
    assert "toy/vanilla/r20/s0/clean" in row and key in row
    assert f"{key}: 1 in the baseline, 128 now" in out


def _refused(toy_sweep, tmp_path, capsys, baseline: dict, *expected: str) -> str:
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(baseline))
    capsys.readouterr()
    assert _check(toy_sweep, path) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no table: nothing was checked
    (line, *hint) = err.strip().splitlines()
    assert line.startswith("error: ") and len(hint) <= 1 and "Traceback" not in err
    for text in expected:
        assert text in line, (text, line)
    return line


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: c["counts"].pop("last.test.accuracy"), "no counts.last.test.accuracy"),
        (lambda c: c["counts"].update({"last.test.accuracy": 0}), "is 0, not a whole number > 0"),
        (lambda c: c["counts"].update({"best_valid.test.accuracy": -5}), "is -5, not a whole"),
        (lambda c: c.pop("counts"), "no counts"),
        (lambda c: c["metrics"].pop("best_valid.test.accuracy"), "no metric best_valid.test.acc"),
        (lambda c: c["metrics"].pop("last.test.aligned_accuracy"), "no metric last.test.aligned"),
        (lambda c: c.pop("preset"), "no preset"),
    ],
    ids=[
        "no-count",
        "zero-count",
        "negative-count",
        "no-counts",
        "no-metric",
        "one-side",
        "preset",
    ],
)
def test_a_baseline_without_a_count_or_a_metric_is_refused(
    toy_sweep, tmp_path, capsys, edit, expected
):
    baseline = _record(toy_sweep, tmp_path / "base.json")
    edit(baseline["cells"]["toy/etf_debias/r20/s1/clean"])
    _refused(toy_sweep, tmp_path, capsys, baseline, "toy/etf_debias/r20/s1/clean", expected)


def test_a_metric_the_run_measures_and_the_baseline_lacks_is_refused(toy_sweep, tmp_path, capsys):
    """The conflicting accuracy taken out of a cell (both selections, and their counts): the
    baseline looks sound on its own, but that metric of the run would go unchecked."""
    baseline = _record(toy_sweep, tmp_path / "base.json")
    cell = baseline["cells"]["toy/vanilla/r20/s1/clean"]
    for selection in ("last", "best_valid"):
        for field in ("metrics", "counts"):
            del cell[field][f"{selection}.test.conflicting_accuracy"]
    _refused(
        toy_sweep,
        tmp_path,
        capsys,
        baseline,
        "cell 'toy/vanilla/r20/s1/clean' has no best_valid.test.conflicting_accuracy, "
        "last.test.conflicting_accuracy, which run toy_vanilla_r20_s1_",
    )


def test_a_baseline_of_another_preset_or_protocol_is_refused(toy_sweep, tmp_path, capsys):
    """The toy sweep ran under the default preset (paper) and protocol clean."""
    baseline = _record(toy_sweep, tmp_path / "base.json")
    smoke = json.loads(json.dumps(baseline))
    for cell in smoke["cells"].values():
        cell["preset"] = "smoke"
    line = _refused(toy_sweep, tmp_path, capsys, smoke, "under preset 'smoke'", "preset 'paper'")
    assert str(toy_sweep) in line
    one = json.loads(json.dumps(baseline))  # one cell of another preset is enough
    one["cells"]["toy/vanilla/r20/s0/clean"]["preset"] = "ci"
    _refused(toy_sweep, tmp_path, capsys, one, "e.g. cell toy/vanilla/r20/s0/clean")
    noisy = json.loads(json.dumps(baseline))
    noisy["cells"] = {
        key.replace("/clean", "/noisy"): dict(cell, protocol="noisy")
        for key, cell in baseline["cells"].items()
    }
    _refused(toy_sweep, tmp_path, capsys, noisy, "protocol 'noisy'", "protocol 'clean'")


# ------------------------------------------------------------------ the ci preset
def test_ci_preset_reads_small_fixed_subsets(raw_root, data_root):
    place = DataPlace(raw_root, data_root)
    config = make_config("vanilla", "cmnist", 5, 0, preset="ci")
    _, splits = load_data(config, place)
    assert len(splits.train) == 6000 and len(splits.test) == 1000
    assert config.hparams["num_threads"] == 1
    again = load_data(make_config("etf_debias", "cmnist", 5, 0, preset="ci"), place)[1]
    assert torch.equal(splits.train.indices, again.train.indices)  # same subset for all methods


def test_resized_reads_keep_labels_and_scale_the_crop(raw_root, data_root):
    config = make_config("vanilla", "cifar10c", 5, 0, preset="ci")
    assert config.data_options == {} and config.hparams["image_size"] == 16
    from debias_bench.config.grid import Grid, expand

    (ci_config,), _ = expand(Grid(["vanilla"], ["cifar10c"], [5.0], [0], preset="ci"))
    assert ci_config.data_options["limit"] == 100  # the preset's small build
    full = make_config("vanilla", "cifar10c", 5, 0, overrides={"eval_limit": 50})
    small = make_config("vanilla", "cifar10c", 5, 0, overrides={"eval_limit": 50, "image_size": 16})
    options = {"limit": 10, "valid_size": 20}
    full, small = (type(c)(**{**c.to_json(), "data_options": options}) for c in (full, small))
    place = DataPlace(raw_root, data_root)
    fam_full, big = load_data(full, place)
    fam_small, little = load_data(small, place)
    assert little.train.images.shape[1:] == (16, 16, 3) and little.train.images.dtype == torch.uint8
    assert torch.equal(little.train.labels, big.train.labels)
    assert fam_small.spec.image_size == (16, 16) and fam_small.spec.crop_padding == 2
    assert fam_full.spec.image_size == (32, 32)  # the cached family keeps its own spec
    mean_big = big.train.images.float().mean()
    assert abs(float(little.train.images.float().mean()) - float(mean_big)) < 2.0


def test_new_keys_at_their_defaults_keep_old_run_ids():
    config = make_config("vanilla", "toy", 20, 0)
    legacy = dict(config.hparams)
    for key in ("image_size", "num_threads"):
        del legacy[key]
    old = type(config)(**{**config.to_json(), "hparams": legacy})
    assert old.run_id == config.run_id
    pinned = make_config("vanilla", "toy", 20, 0, overrides={"num_threads": 1})
    assert pinned.run_id != config.run_id


def test_ci_preset_is_deterministic(raw_root, data_root, tmp_path):
    """Two runs of the same ci cell give identical metrics on the CPU."""
    place = DataPlace(raw_root, data_root)
    config = make_config("lff", "cmnist", 5, 0, protocol="clean", preset="ci")
    cpu, threads = torch.device("cpu"), torch.get_num_threads()
    a = train_run(config, RunStore(tmp_path / "a").run(config.run_id), place, cpu)
    b = train_run(config, RunStore(tmp_path / "b").run(config.run_id), place, cpu)
    assert a["selections"] == b["selections"]
    assert torch.get_num_threads() == threads  # the run's pinned thread count is undone


@pytest.mark.slow
@pytest.mark.realdata
def test_committed_baseline_holds(raw_root, data_root, tmp_path):
    """The project's own regression check: the ci preset on every dataset here against
    tests/baselines/ci_preset.json (scripts/ci_regress.sh; update it with `record`)."""
    needed = ["cifar10-jpeg.tar.gz", "dogs-and-cats-128.tar", "bar.tar"]
    missing = [name for name in needed if not (raw_root / name).is_file()]
    if missing:
        pytest.skip(f"raw data {', '.join(missing)} not under {raw_root}")
    env = {**os.environ, "BENCH_RAW_ROOT": str(raw_root), "BENCH_DATA_ROOT": str(data_root)}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "ci_regress.sh"), "check", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    assert "0 regressed, 0 missing" in done.stdout
