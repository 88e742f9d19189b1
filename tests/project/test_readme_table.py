"""The docs' "Adding a report table" plugin (docs/extending/table.md), exactly as printed, run
end to end from a folder outside the repository through ``BENCH_PLUGINS`` on a store of real
(short) runs."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from support.processes import run_bench

pytestmark = pytest.mark.slow  # two short real runs on a tiny raw source (half a minute)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "extending" / "table.md"
PLUGIN = "my_table.py"


def docs_file(name: str) -> str:
    """The fenced block after ``<!-- file: NAME -->`` on the docs page."""
    pattern = re.compile(rf"<!-- file: {re.escape(name)} -->\n```\w*\n(.*?)```", re.DOTALL)
    found = pattern.findall(PAGE.read_text())
    assert len(found) == 1, f"{PAGE.name} has {len(found)} blocks marked {name}"
    return found[0]


def bench(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_bench(*args, env=env, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A folder outside the repository holding the docs' plugin and a store of two done
    runs (vanilla and etf_debias, ``ci`` preset, on a tiny Colored MNIST raw source)."""
    root = tmp_path_factory.mktemp("readme_table")
    home = root / "my_project"
    home.mkdir()
    (home / PLUGIN).write_text(docs_file(PLUGIN))
    env = {
        **os.environ,
        "BENCH_RAW_ROOT": str(root / "raw"),
        "BENCH_DATA_ROOT": str(root / "data"),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("PYTHONPATH", None)
    env.pop("BENCH_PLUGINS", None)
    done = bench("data", "fixture", "cmnist", "--out", env["BENCH_RAW_ROOT"], env=env, cwd=home)
    assert done.returncode == 0, done.stderr
    run = bench(
        "run", "--methods", "vanilla,etf_debias", "--datasets", "cmnist", "--ratios", "1",
        "--preset", "ci", "--set", "steps=30", "--out", "runs", env=env, cwd=home,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return home, env


def test_the_readme_table_plugin_reports_as_printed(project):
    home, env = project
    env = {**env, "BENCH_PLUGINS": f"./{PLUGIN}"}

    shown = bench("report", "--help", env=env, cwd=home)
    assert shown.returncode == 0, shown.stderr
    assert "gap: bias-aligned minus bias-conflicting accuracy" in " ".join(shown.stdout.split())

    report = bench(
        "report", "--table", "gap", "--out", "runs", "--format", "csv", env=env, cwd=home
    )
    assert report.returncode == 0, report.stderr
    cells = {row["column"]: row for row in csv.DictReader(io.StringIO(report.stdout))}
    assert set(cells) == {"vanilla", "etf_debias"}
    for run_dir in (home / "runs").iterdir():
        if not (run_dir / "result.json").is_file():
            continue
        result = json.loads((run_dir / "result.json").read_text())
        test = result["selections"]["last"]["test"]
        cell = cells[result["method"]]
        expected = test["aligned_accuracy"] - test["conflicting_accuracy"]
        assert float(cell["mean"]) == pytest.approx(expected), (result["method"], cell)
        assert (cell["table"], cell["dataset"], cell["ratio %"], cell["n"]) == (
            "gap",
            "cmnist",
            "1",
            "1",
        )
    smallest = min(float(c["mean"]) for c in cells.values())
    assert {m for m, c in cells.items() if c["bold"] == "True"} == {
        m for m, c in cells.items() if float(c["mean"]) == smallest
    }

    # not in --table all (it was not registered with in_all=True), the paper's tables are
    every = bench("report", "--out", "runs", env=env, cwd=home)
    assert every.returncode == 0, every.stderr
    assert "Bias gap" not in every.stdout and "Table 1" in every.stdout


def test_without_the_plugin_the_table_is_not_a_choice(project):
    home, env = project
    report = bench("report", "--table", "gap", "--out", "runs", env=env, cwd=home)
    assert report.returncode == 2
    assert "invalid choice: 'gap'" in report.stderr
