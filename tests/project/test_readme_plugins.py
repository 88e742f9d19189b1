"""The docs' "Adding a method" and "Adding a dataset" plugins (docs/extending/method.md and
dataset.md), exactly as printed, run end to end from a folder outside the repository through
``BENCH_PLUGINS`` (paths, no PYTHONPATH): the label-smoothing method, the JTT-like one with its
YAML (preparation pass, per-sample weights, a step count that keeps its share of a preset's
run) and the Colored Fashion-MNIST dataset."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from support.processes import run_bench

pytestmark = pytest.mark.slow  # three short runs through local workers (a minute or two)

EXTENDING = Path(__file__).resolve().parents[2] / "docs" / "extending"
PAGES = (EXTENDING / "method.md", EXTENDING / "dataset.md")


def docs_files() -> dict[str, str]:
    """``<!-- file: NAME -->`` followed by a fenced block, on the pages -> {NAME: code}."""
    pattern = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.DOTALL)
    return {name: code for page in PAGES for name, code in pattern.findall(page.read_text())}


def bench(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_bench(*args, env=env, cwd=cwd, timeout=900)


def test_the_readme_plugins_run_as_printed(tmp_path):
    files = docs_files()
    assert {"my_method.py", "cfashion.py", "my_jtt.py", "my_jtt.yaml"} <= set(files)
    home = tmp_path / "my_project"  # outside the repository
    home.mkdir()
    for name, code in files.items():
        (home / name).write_text(code)
    env = {
        **os.environ,
        "BENCH_PLUGINS": "./cfashion.py,./my_method.py,./my_jtt.py",
        "BENCH_RAW_ROOT": str(tmp_path / "raw"),
        "BENCH_DATA_ROOT": str(tmp_path / "data"),
    }
    env.pop("PYTHONPATH", None)

    # the dataset's raw source: tiny idx files in Fashion-MNIST's layout (no download here)
    done = bench("data", "fixture", "cfashion", "--out", env["BENCH_RAW_ROOT"], env=env, cwd=home)
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "raw" / "fashion").glob("train-images-idx3-ubyte*"))

    # the recipe: every method uses its Colored MNIST settings on the new dataset
    shown = bench("config", "lff", "cfashion", "--ratio", "1", env=env, cwd=home)
    assert shown.returncode == 0, shown.stderr
    assert "lff.yaml datasets.cmnist (recipe of cfashion)" in shown.stdout
    shown = bench("config", "my_method", "cfashion", "--set", "smoothing=0.2", env=env, cwd=home)
    assert re.search(r"^smoothing\s+0.2\s+--set$", shown.stdout, re.MULTILINE), shown.stdout
    # the JTT-like method's step count: its share of the shorter run, or the YAML's preset value
    shown = bench("config", "my_jtt", "cfashion", "--preset", "ci", env=env, cwd=home)
    assert shown.returncode == 0, shown.stderr
    source = r"my_jtt declaration, scaled to the run \(240 of 21100 steps\)"
    assert re.search(rf"^id_steps\s+11\s+{source}$", shown.stdout, re.MULTILINE), shown.stdout
    shown = bench("config", "my_jtt", "cfashion", "--preset", "smoke", env=env, cwd=home)
    assert re.search(r"^id_steps\s+10\s+my_jtt\.yaml presets\.smoke$", shown.stdout, re.M)
    shown = bench("config", "my_jtt", "cfashion", "--preset", "paper", env=env, cwd=home)
    assert re.search(r"^id_steps\s+1000\s+my_jtt declaration$", shown.stdout, re.M), shown.stdout
    assert "upweight choice 20.0|50.0|100.0" in shown.stdout.splitlines()[-1]

    # the page's run, on the ci preset to keep it short, through worker processes
    out = tmp_path / "runs"
    run = bench(
        "run", "--methods", "vanilla,etf_debias,my_method,my_jtt", "--datasets", "cfashion",
        "--ratios", "1", "--preset", "ci", "--set", "lr=1e-3", "--set", "steps=30",
        "--launcher", "local",
        "--workers", "2", "--out", str(out), env=env, cwd=home,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(" done ") == 4, run.stdout
    assert (tmp_path / "data" / "cfashion").is_dir()  # its own folder, not cmnist's

    report = bench("report", "--out", str(out), "--format", "markdown", env=env, cwd=home)
    assert report.returncode == 0, report.stderr
    assert "Table 1" in report.stdout and "MyMethod" in report.stdout and "MyJTT" in report.stdout
