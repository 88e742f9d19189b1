"""`bench` in a new interpreter, and the environment that finds the test plugins."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.store import RunStore


def run_bench(
    *args: str, env: Mapping[str, str], cwd: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``bench ARGS`` in a new interpreter (this environment's package), output captured."""
    return subprocess.run(
        [sys.executable, "-m", "debias_bench.cli", *args],
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=cwd,
        timeout=timeout,
    )


def bench_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment of a `bench` process that finds the scripted dataset of
    ``support.scripted`` (a plugin) and keeps its data under ``tmp_path``."""
    tests = str(Path(__file__).resolve().parents[1])
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
        "BENCH_PLUGINS": "support.scripted",
        "BENCH_RAW_ROOT": str(tmp_path / "raw"),
        "BENCH_DATA_ROOT": str(tmp_path / "data"),
        "OMP_NUM_THREADS": "1",
        **extra,
    }


def run_of_seed(out: Path, seed: int = 0) -> RunDir:
    """The run folder of seed ``seed`` in the run store ``out`` (the test's one run of it)."""
    found = [d for d in RunStore(out).runs() if d.config()["seed"] == seed]
    assert found, f"no run of seed {seed} under {out}"
    return found[0]
