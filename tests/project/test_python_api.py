"""Issue 49: the Python API page (docs/python-api.md) runs as written, and what it shows holds:
``db.run`` trains a grid, ``db.results`` gives the report's numbers, ``db.report`` returns
exactly the text ``bench report`` prints for the same arguments, ``db.tune`` writes the
``tuned.yaml`` ``bench tune`` writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from debias_bench.cli import main

pytestmark = pytest.mark.realdata

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_page_runs_as_written_and_the_cli_prints_the_same(
    tmp_path, monkeypatch, raw_root, data_root, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCH_RAW_ROOT", str(raw_root))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(data_root))
    namespace: dict = {}
    code = blocks()
    assert len(code) >= 6
    for block in code:
        exec(compile(block, str(PAGE), "exec"), namespace)
    assert (tmp_path / "conflicting.png").stat().st_size > 0
    db = namespace["db"]
    capsys.readouterr()
    for fmt in ("latex", "markdown", "csv"):
        assert main(["report", "--out", "runs", "--table", "synthetic", "--format", fmt]) == 0
        printed = capsys.readouterr().out
        assert db.report("runs", table="synthetic", format=fmt) == printed, fmt
    # the DataFrame's per-method means are the LaTeX table's cells
    means = namespace["means"]
    assert len(means) == 2
    rerun = db.run(["vanilla"], ["cmnist"], ratios=[5], seeds=[0, 1], preset="ci", store="runs")
    assert rerun.exit_code == 0 and rerun.ran == 0  # done: nothing trains again
    # db.tune is bench tune: the same command finds every run done and writes the same choice
    tuned = tmp_path / "tuning" / "tuned.yaml"
    chosen = tuned.read_text()
    argv = ["tune", "--methods", "vanilla", "--datasets", "cmnist", "--ratios", "5",
            "--trials", "2", "--tune-seeds", "0", "--seeds", "1", "--preset", "ci",
            "--out", "tuning"]  # fmt: skip
    assert main(argv) == 0
    assert tuned.read_text() == chosen
