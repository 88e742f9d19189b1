"""The docs' "Adding a launcher" plugin (docs/extending/launcher.md), exactly as printed, run end
to end from a folder outside the repository through ``BENCH_PLUGINS`` (a path, no PYTHONPATH):
its name is a valid ``--launcher``, its flags are in ``bench run --help``, and it trains real
Colored MNIST runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from support.processes import run_bench

pytestmark = [pytest.mark.slow, pytest.mark.realdata]  # two short runs in worker processes

PAGE = Path(__file__).resolve().parents[2] / "docs" / "extending" / "launcher.md"


def docs_file(name: str) -> str:
    """The fenced block after ``<!-- file: NAME -->`` on the docs page."""
    pattern = re.compile(rf"<!-- file: {re.escape(name)} -->\n```\w*\n(.*?)```", re.DOTALL)
    (code,) = pattern.findall(PAGE.read_text())
    return code


def bench(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_bench(*args, env=env, cwd=cwd, timeout=900)


def test_the_readme_launcher_runs_as_printed(tmp_path, raw_root, data_root):
    home = tmp_path / "my_project"  # outside the repository
    home.mkdir()
    (home / "my_launcher.py").write_text(docs_file("my_launcher.py"))
    env = {
        **os.environ,
        "BENCH_PLUGINS": "./my_launcher.py",
        "BENCH_RAW_ROOT": str(raw_root),
        "BENCH_DATA_ROOT": str(data_root),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("PYTHONPATH", None)

    listed = bench("list", "launchers", env=env, cwd=home)
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("| niced ")]
    assert "--niceness --niced-workers" in row and str(home / "my_launcher.py") in row

    shown = bench("run", "--help", env=env, cwd=home)
    assert shown.returncode == 0, shown.stderr
    assert "{inline,local,slurm,ray,niced}" in shown.stdout
    section = shown.stdout.split("--launcher niced:")[1]
    assert "--niceness 1..19" in section and "--niced-workers" in section

    # its own flag is checked by argparse like a built-in one
    bad = bench("run", "--launcher", "niced", "--niceness", "25", "--dry-run", env=env, cwd=home)
    assert bad.returncode == 2 and "--niceness" in bad.stderr and "Traceback" not in bad.stderr

    out = tmp_path / "runs"
    run = bench(
        "run", "--methods", "vanilla,etf_debias", "--datasets", "cmnist", "--ratios", "1",
        "--preset", "smoke", "--launcher", "niced", "--niceness", "15", "--niced-workers", "2",
        "--out", str(out), env=env, cwd=home,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "on 2 niced worker(s)" in run.stderr
    assert run.stdout.count(" done ") == 2, run.stdout
    statuses = [json.loads(p.read_text()) for p in out.glob("*/status.json")]
    assert len(statuses) == 2
    for status in statuses:  # recorded by the plugin's workers, through its ctx.worker_job
        assert status["state"] == "done" and status["exit_code"] == 0
        assert status["launcher"] == "niced" and status["niceness"] == 15
