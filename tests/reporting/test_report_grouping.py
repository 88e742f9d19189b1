"""One meaning per cell (issue 14, item 8): the reporter averages the seeds of one
configuration only, stops with the differing keys and a ``--where`` filter when a cell would mix
configurations, and ``--where KEY=VALUE`` picks one.

The runs are written by hand from real resolved configs (``make_config`` with the ``ci``
preset), so they carry exactly what ``bench run`` records; no training is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from debias_bench.cli import main
from debias_bench.config.run_config import make_config
from debias_bench.errors import ConfigError
from debias_bench.reporting import build_tables, load_records
from debias_bench.reporting.grouping import apply_where, parse_where
from debias_bench.runs.provenance import config_json
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore


def write(
    root: Path,
    seed: int,
    acc: float,
    overrides: dict[str, Any] | None = None,
    data_options: dict[str, Any] | None = None,
    fingerprint: str | None = None,
    method: str = "vanilla",
) -> str:
    """A finished ``ci`` run of ``method`` on Colored MNIST 5 % as the engine leaves it."""
    config = make_config(
        method,
        "cmnist",
        5,
        seed,
        protocol="clean",
        preset="ci",
        overrides=overrides,
        data_options=data_options,
    )
    run = RunStore(root).run(config.run_id)
    run.plan(config_json(config))
    metrics = {"accuracy": acc, "conflicting_accuracy": acc - 5, "per_class_accuracy": [acc]}
    chosen = {"step": 240, "valid": metrics, "test": metrics}
    result = {
        "method": method,
        "dataset": "cmnist",
        "ratio": 5.0,
        "seed": seed,
        "selections": {"last": chosen, "best_valid": chosen, "best_test": chosen},
        "train_time_s": 1.0,
        "device": "cpu",
    }
    if fingerprint:
        result["data_fingerprint"] = fingerprint
    run.transition(RunState.RUNNING, attempt=1)
    run.write_result(result)
    run.transition(RunState.DONE, exit_code=0)
    return config.run_id


def cell(records, method: str = "vanilla"):
    (table,) = build_tables(records, "synthetic")
    (row,) = [r for r in table.rows if r.kind == "ours"]
    return row.cells[method]


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """The issue's case: five seeds at the preset's 240 steps, one at 1200 steps."""
    root = tmp_path / "runs"
    for seed in range(5):
        write(root, seed, 60.0 + seed)
    write(root, 0, 90.0, {"steps": 1200})
    return root


def test_a_cell_that_would_mix_configurations_stops_with_the_keys_and_a_filter(mixed):
    with pytest.raises(ConfigError) as info:
        build_tables(load_records(RunStore(mixed)), "synthetic")
    message, hint = info.value.message, info.value.hint
    assert "cmnist, 5.0, vanilla (protocol clean, preset ci)" in message
    assert "6 runs of different configurations" in message
    assert "steps (240: 5 runs; 1200: 1 run)" in message
    assert "--where steps=240" in hint
    # no other key is named: the sources and provenance of the runs are not configuration
    assert message.count("(") == 2


def test_where_picks_one_configuration(mixed):
    records = load_records(RunStore(mixed))
    short = cell(apply_where(records, parse_where(["steps=240"])))
    assert (short.mean, short.n) == (pytest.approx(62.0), 5)  # seeds 0-4, not "n = 6"
    long = cell(apply_where(records, {"steps": "1200"}))
    assert (long.mean, long.n) == (90.0, 1)
    both = apply_where(records, {"hparams.steps": "1.2e3", "preset": "ci"})  # by value
    assert cell(both).mean == 90.0


def test_bench_report_exit_codes(mixed, capsys):
    assert main(["report", "--out", str(mixed)]) == 2
    err = capsys.readouterr().err
    assert "differ in steps" in err and "--where steps=240" in err and "Traceback" not in err
    assert main(["report", "--out", str(mixed), "--where", "steps=1200"]) == 0
    out = capsys.readouterr().out
    assert "90.00" in out and "62.00" not in out
    assert main(["report", "--out", str(mixed), "--where", "stepz=3"]) == 2
    err = capsys.readouterr().err
    assert "no run records a value for 'stepz'" in err and "steps" in err


def test_where_is_key_equals_value():
    with pytest.raises(ConfigError, match="not KEY=VALUE"):
        parse_where(["steps"])


def test_seeds_of_one_configuration_average_and_speed_settings_do_not_split(tmp_path):
    root = tmp_path / "runs"
    write(root, 0, 60.0)
    write(root, 1, 62.0, {"compile": True, "channels_last": "false"})  # same numbers, faster
    write(root, 0, 70.0, method="lff")  # another column: never compared with vanilla's
    records = load_records(RunStore(root))
    assert (cell(records).mean, cell(records).n) == (61.0, 2)
    assert cell(records, "lff").mean == 70.0


def test_a_data_option_that_differs_is_named(tmp_path):
    root = tmp_path / "runs"
    write(root, 0, 60.0)
    write(root, 1, 62.0, data_options={"source": "imported"})
    with pytest.raises(ConfigError, match=r"differ in source \(") as info:
        build_tables(load_records(RunStore(root)), "synthetic")
    assert "--where source=" in info.value.hint


def test_runs_built_from_different_data_are_not_averaged(tmp_path):
    root = tmp_path / "runs"
    write(root, 0, 60.0, fingerprint="aaaa")
    write(root, 1, 62.0, fingerprint="bbbb")
    with pytest.raises(ConfigError, match="differ in data_fingerprint") as info:
        build_tables(load_records(RunStore(root)), "synthetic")
    assert '"aaaa": 1 run' in str(info.value) and "--where data_fingerprint=" in info.value.hint
    records = load_records(RunStore(root))
    assert cell(apply_where(records, {"data_fingerprint": "bbbb"})).mean == 62.0
    # a run that recorded no fingerprint (written before they were) does not split a cell
    write(root, 2, 64.0)
    only_a = load_records(RunStore(root))
    only_a = only_a[only_a["data_fingerprint"] != "bbbb"]
    assert cell(only_a).n == 2


def test_failed_runs_of_another_configuration_also_block_the_cell(tmp_path):
    """A pending or failed run of another configuration would change the cell's expected n."""
    root = tmp_path / "runs"
    write(root, 0, 60.0)
    config = make_config("vanilla", "cmnist", 5, 1, protocol="clean", preset="ci")
    other = make_config(
        "vanilla", "cmnist", 5, 1, protocol="clean", preset="ci", overrides={"lr": 0.01}
    )
    for c in (config, other):
        run = RunStore(root).run(c.run_id)
        run.plan(config_json(c))
        run.transition(RunState.FAILED, error="boom")
    with pytest.raises(ConfigError, match=r"differ in lr \(0\.001: 2 runs; 0\.01: 1 run\)"):
        build_tables(load_records(RunStore(root)), "synthetic")
    only = apply_where(load_records(RunStore(root)), {"lr": "1e-3"})
    assert cell(only).n == 1 and cell(only).expected_n == 2  # seed 1 failed: shown as n=1
