"""Issue 51, item 5: ``scripts/gpu_check.sh`` is ready for a GPU. Its CPU dry run
(``DRY_RUN=1``: two methods, Colored MNIST only, a few steps) runs every stage end to end and
each leaves its output file under OUT; a bad stage name is refused. Measured on the 2-core AMD
EPYC while a full test suite ran beside it: all six stages 155 s wall (57 s CPU), Colored MNIST's
build included; the four default stages alone about 60 s"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_check.sh"
STAGES = ["syncs", "speed", "pack", "perf", "e2e", "amp"]


def dry_run(tmp_path: Path, *stages: str, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    bin_dir = str(Path(sys.executable).parent)
    environ = {
        **os.environ,
        "DRY_RUN": "1",
        "OUT": str(out),
        "WORK": str(tmp_path / "work"),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        **env,
    }
    environ.pop("BENCH_PLUGINS", None)
    done = subprocess.run(
        ["bash", str(SCRIPT), *stages],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, out


@pytest.mark.slow
def test_the_dry_run_runs_every_stage_on_the_cpu(tmp_path, raw_root, data_root):
    done, out = dry_run(tmp_path, *STAGES, BENCH_RAW_ROOT=str(raw_root), DATA=str(data_root))
    log = (out / "log.txt").read_text()
    assert done.returncode == 0, log[-3000:]
    for stage in ["syncs", "speed amp=none", "speed amp=bf16", "pack", "perf", "e2e"]:
        assert f"== {stage}: rc=0 in " in log, (stage, log[-3000:])
    assert "== amp=none: rc=0" in log and "== amp=bf16: rc=0" in log
    assert "== syncs-torch: skipped (set_sync_debug_mode is CUDA's)" in log

    syncs = json.loads((out / "syncs.json").read_text())["summary"]
    assert {r["method"]: r["host_syncs_per_step"] for r in syncs} == {"vanilla": 0, "lc": 0}
    for amp in ("none", "bf16"):
        speed = json.loads((out / f"speed-{amp}.json").read_text())
        assert speed["set"] == {"amp": amp}
        assert {r["method"] for r in speed["summary"] if r["ms_per_step"]} == {
            "bare",
            "vanilla",
            "lc",
        }
    perf = json.loads((out / "perf.json").read_text())
    assert perf["projection"] and perf["summary"]
    with open(out / "pack.csv") as f:
        pack = list(csv.DictReader(f))
    assert sorted(r["method"] for r in pack) == ["lc", "vanilla"]
    assert all(r["state"] == "done" and float(r["steps_per_s"]) > 0 for r in pack)
    assert (out / "repro" / "cmnist.csv").is_file()
    assert (out / "amp-none.md").is_file() and (out / "amp-bf16.md").is_file()
    assert (out / "results.tgz").is_file()


def test_an_unknown_stage_is_refused_naming_the_valid_ones(tmp_path):
    done, out = dry_run(tmp_path, "nope", BENCH_RAW_ROOT=str(tmp_path / "raw"))
    assert done.returncode == 2
    assert (
        "unknown stage nope (valid: syncs, speed, pack, perf, e2e, amp)"
        in (out / "log.txt").read_text()
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--cuda-sync-debug"], "--cuda-sync-debug checks --host-syncs"),
        (["--host-syncs", "--cuda-sync-debug"], "--cuda-sync-debug is PyTorch's CUDA check"),
    ],
)
def test_the_cuda_cross_check_is_refused_off_cuda(capsys, flags, message):
    from debias_bench.cli import main

    assert main(["perf", "--device", "cpu", "--datasets", "cmnist", *flags]) == 2
    assert message in capsys.readouterr().err
