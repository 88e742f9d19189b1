"""Bad input to `bench run`: one line naming the problem and the fix, exit code 2, no
traceback, and not a single run directory created (checked before anything is recorded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from debias_bench.cli import main

GRID = ["--methods", "vanilla", "--datasets", "cmnist", "--ratios", "5", "--preset", "ci"]


def _cases(tmp: Path) -> list[tuple[list[str], str]]:
    a_file = tmp / "a_file"
    a_file.write_text("not a directory")
    malformed = tmp / "resources.yaml"
    malformed.write_text("default: {gpus: two}\n")
    not_yaml = tmp / "broken.yaml"
    not_yaml.write_text("default: [unclosed\n")
    strangers = tmp / "strangers.yaml"
    strangers.write_text("datasets: {cmnsit: {time: 30}}\n")
    return [
        (["--set", "lr=abc"], "lr='abc' is not valid"),
        (["--set", "batch_size=0"], "batch_size=0 is not valid"),
        (["--set", "batch_size=-4"], "batch_size=-4 is not valid"),
        (["--set", "alpah=1"], "no hyperparameter 'alpah'"),
        (["--epochs", "0"], "epochs=0 is not valid"),
        (["--timeout", "0", "--launcher", "local"], "bad --timeout '0'"),
        (["--timeout", "soon", "--launcher", "local"], "bad --timeout 'soon'"),
        (["--seeds", "-1"], "--seeds must be integers >= 0"),
        (["--seeds", "a,b"], "bad list of integers"),
        (["--device", "gpu"], "unknown --device 'gpu'"),
        (["--out", str(a_file)], "is a file, not a directory"),
        (["--out", "/proc/no-such-dir/runs"], "is not writable"),
        (["--launcher", "slurm", "--resources", str(malformed)], "gpus must be a whole number"),
        (["--launcher", "slurm", "--resources", str(not_yaml)], "is not valid YAML"),
        (["--launcher", "slurm", "--resources", str(strangers)], "unknown dataset(s) ['cmnsit']"),
        (["--methods", "vanila"], "unknown method 'vanila'"),
    ]


def test_bad_inputs_exit_2_with_one_message_and_no_run(tmp_path, raw_root, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_RAW_ROOT", str(raw_root))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))
    for extra, message in _cases(tmp_path):
        out = tmp_path / "runs"
        args = ["run", *GRID, "--out", str(out), *extra]
        code = main(args)
        err = capsys.readouterr().err
        assert code == 2, (extra, err)
        assert message in err and err.startswith("error: "), (extra, err)
        assert "Traceback" not in err
        assert not out.exists() or not any(out.iterdir()), extra


def test_missing_data_is_named_before_any_run_is_recorded(tmp_path, monkeypatch, capsys):
    """`--methods all --datasets bffhq` without the data used to record 8 failed runs."""
    monkeypatch.setenv("BENCH_RAW_ROOT", str(tmp_path / "raw"))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))
    out = tmp_path / "runs"
    code = main(
        ["run", "--methods", "all", "--datasets", "bffhq", "--ratios", "1", "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "bffhq" in err and "bench data" in err, err
    assert not out.exists()


def test_no_traceback_through_the_console_script(tmp_path):
    """The same path a user takes: a new interpreter, stderr as printed."""
    env = {**os.environ, "BENCH_DATA_ROOT": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "debias_bench.cli", "run", *GRID, "--device", "gpu"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2 and done.stderr.count("\n") <= 2, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("flag", ["--seeds 0,0", "--ratios 5,5.0"])
def test_duplicated_grid_entries_collapse_before_launch(
    tmp_path, raw_root, monkeypatch, capsys, flag
):
    monkeypatch.setenv("BENCH_RAW_ROOT", str(raw_root))
    args = ["run", *GRID, "--out", str(tmp_path / "runs"), "--dry-run", *flag.split()]
    assert main(args) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
