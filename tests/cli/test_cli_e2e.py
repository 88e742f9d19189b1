"""End to end through the installed ``bench`` console script, on real Colored MNIST."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.processes import run_bench

pytestmark = pytest.mark.realdata


bench = run_bench


@pytest.fixture
def env(raw_root, data_root):
    return {**os.environ, "BENCH_RAW_ROOT": str(raw_root), "BENCH_DATA_ROOT": str(data_root)}


def test_run_status_report(tmp_path, env):
    out = tmp_path / "runs"
    grid = [
        "--methods",
        "vanilla,etf_debias",
        "--datasets",
        "cmnist",
        "--ratios",
        "1",
        "--seeds",
        "0,1",
        "--preset",
        "smoke",
        "--out",
        str(out),
        "--device",
        "cpu",
    ]
    first = bench("run", *grid, env=env)
    assert first.returncode == 0, first.stderr
    assert "4 ran, 0 failed" in first.stderr
    assert "| etf_debias" in first.stdout and "| done" in first.stdout

    run_dirs = sorted(p for p in out.iterdir())
    assert len(run_dirs) == 4
    for run_dir in run_dirs:
        assert {"config.json", "status.json", "metrics.jsonl", "checkpoint.pt", "result.json"} <= {
            p.name for p in run_dir.iterdir()
        }
        result = json.loads((run_dir / "result.json").read_text())
        assert result["dataset"] == "cmnist" and result["ratio"] == 1.0
        assert json.loads((run_dir / "status.json").read_text())["state"] == "done"

    second = bench("run", *grid, env=env)  # everything is done: nothing reruns
    assert second.returncode == 0 and "0 ran" in second.stderr

    status = bench("status", "--out", str(out), env=env)
    assert status.returncode == 0 and "4 done" in status.stdout

    report = bench("report", "--out", str(out), env=env)
    assert report.returncode == 0, report.stderr
    assert "ETF-Debias" in report.stdout and "Vanilla" in report.stdout
    assert "| cmnist" in report.stdout and "±" in report.stdout


def test_missing_data_is_a_clear_error(tmp_path):
    env = {
        **os.environ,
        "BENCH_RAW_ROOT": str(tmp_path / "nowhere"),
        "BENCH_DATA_ROOT": str(tmp_path / "data"),
    }
    env["no_proxy"] = "*"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import debias_bench.datasets.mnist_raw as m; m.MIRRORS = ('http://127.0.0.1:9/',);"
            "from debias_bench.cli import main; raise SystemExit(main(['run', '--preset', 'smoke',"
            f"'--out', r'{tmp_path / 'runs'}']))",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    # one error before anything starts (issue 36): where it looked and the command that
    # prepares it, exit 2, and no run folder (not one failed run per ratio)
    assert proc.returncode == 2, proc.stderr
    assert "MNIST idx files not found" in proc.stderr
    assert "bench data prepare cmnist" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
