"""`bench perf`: the cell runner, the bare loop, the timer, the CLI and the cost model.

Speed targets are not asserted (they are measurements, not unit tests); the cells here time a
couple of steps of Colored MNIST's MLP, on synthetic data.
"""

from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F
from support.toy import make_toy_split

from debias_bench.cli import main
from debias_bench.config.hparams import EngineParams
from debias_bench.data.contract import to_float
from debias_bench.methods.common import make_classifier
from debias_bench.perf import cells as perf
from debias_bench.perf.cells import run_cell, run_cell_isolated, run_cell_subprocess, run_cell_warm
from debias_bench.perf.projection import project, run_steps
from debias_bench.perf.speed import (
    BARE,
    Cell,
    StepTimer,
    bare_loop,
    cell_overrides,
    crop_flip,
)
from debias_bench.registry import DATASETS
from debias_bench.training.optim import make_optimizer

TINY = {"steps": 2, "warmup": 1, "threads": 1}
CPU = torch.device("cpu")


@pytest.mark.parametrize("method", [BARE, "vanilla", "etf_debias"])
def test_cell_measures_speed_and_memory(method):
    found = run_cell(Cell("cmnist", method, **TINY))
    assert found.error is None
    assert (found.method, found.backbone, found.batch_size) == (method, "mlp", 256)
    assert found.warmup_steps == 1 and found.timed_steps == 2
    assert found.steps_per_s > 0 and found.ms_per_step > 0
    assert found.peak_mb >= found.start_mb > 0 and found.memory == "peak RSS"


#: the two ways a cell gets a process of its own: forked warm (the default), or a fresh
#: interpreter (``BENCH_WORKER_START=cold``, or a platform without a fork server)
ISOLATED = pytest.mark.parametrize("isolated", [run_cell_warm, run_cell_subprocess])


@ISOLATED
def test_cell_in_its_own_process(isolated):
    found = isolated(Cell("cmnist", "vanilla", **TINY))
    assert found.error is None and found.timed_steps == 2 and found.steps_per_s > 0
    assert found.peak_mb >= found.start_mb > 0


def test_cells_fork_warm_unless_told_otherwise(monkeypatch):
    calls = []
    monkeypatch.setattr(perf, "run_cell_warm", lambda cell, timeout_s: calls.append("warm"))
    monkeypatch.setattr(perf, "run_cell_subprocess", lambda cell, timeout_s: calls.append("cold"))
    run_cell_isolated(Cell("cmnist", "vanilla"))
    monkeypatch.setenv("BENCH_WORKER_START", "cold")
    run_cell_isolated(Cell("cmnist", "vanilla"))
    assert calls == ["warm", "cold"]


def test_harness_cell_runs_until_the_minimum_time():
    found = run_cell(Cell("cmnist", "vanilla", steps=2, warmup=1, threads=1, min_time_s=0.3))
    assert found.error is None and found.timed_steps > 2 and found.seconds >= 0.3


@ISOLATED
def test_slow_cells_come_back_as_errors(isolated):
    found = isolated(Cell("cifar10c", "vanilla", steps=10**6, warmup=1), timeout_s=3)
    assert found.error == "timed out after 3 s (--cell-timeout)" and found.timed_steps == 0


def test_killed_cells_come_back_as_errors(monkeypatch):

    def killed(*args, **kwargs):
        return subprocess.CompletedProcess(args, -9, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", killed)
    assert run_cell_subprocess(Cell("cmnist", "vanilla")).error == "killed by signal 9"


@ISOLATED
def test_cell_failure_comes_back_as_an_error(isolated):
    found = isolated(Cell("cmnist", "no_such_method", **TINY))
    assert "no_such_method" in found.error and found.timed_steps == 0


def test_bare_loop_learns():
    """On a learnable toy set the bare loop lowers the loss and moves every parameter."""
    spec = DATASETS.get("toy").spec
    train = make_toy_split(512, 0.2, 1, "train")
    hp = EngineParams.of({"backbone": "mlp", "optimizer": "adam", "lr": 1e-2, "weight_decay": 0.0})
    torch.manual_seed(0)
    model = make_classifier(spec, hp, CPU)
    before = [p.detach().clone() for p in model.parameters()]
    x, y = to_float(train.images, spec), train.labels
    with torch.no_grad():
        loss_before = float(F.cross_entropy(model(x), y))
    timer = StepTimer(0, 60, CPU)
    last = bare_loop(model, make_optimizer(model.parameters(), hp), train, spec, 64, timer)
    with torch.no_grad():
        loss_after = float(F.cross_entropy(model(x), y))
    assert timer.timed()[0] == 60 and math.isfinite(float(last))
    assert loss_after < 0.5 * loss_before
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_crop_flip_takes_windows_of_the_padded_image():
    images = torch.randint(1, 256, (16, 6, 5, 3), dtype=torch.uint8)
    out = crop_flip(images, 2, True)
    assert out.shape == images.shape and out.dtype == torch.uint8
    padded = F.pad(images, (0, 0, 2, 2, 2, 2))
    for src, got in zip(padded, out, strict=True):
        windows = [src[i : i + 6, j : j + 5] for i in range(5) for j in range(5)]
        assert any(torch.equal(got, w) or torch.equal(got, w.flip(1)) for w in windows)
    same = crop_flip(images, 0, False)
    assert torch.equal(same, images)


def test_timer_windows_and_budget():
    timer = StepTimer(2, 3, CPU)
    timer.start()
    for step in range(1, 6):
        assert not timer.done
        timer.advance(step)
    assert timer.done and timer.warmup_steps == 2 and timer.timed()[0] == 3

    patient = StepTimer(0, 2, CPU, min_time_s=0.05)  # 2 steps are not enough: 50 ms are
    patient.start()
    steps = 0
    while not patient.done:
        steps += 1
        time.sleep(0.005)
        patient.advance(steps)
    timed_steps, seconds = patient.timed()
    assert timed_steps == steps > 2 and seconds >= 0.05

    slow = StepTimer(5, 20, CPU, budget_s=0.0)  # every step overruns: the first is timed alone
    slow.start()
    slow.advance(1)
    assert slow.done and slow.warmup_steps == 0 and slow.timed()[0] == 1


def test_overrides_shorten_preparation_and_keep_the_paper_config():
    lff_be = cell_overrides("lff_be", Cell("cifar10c", "lff_be"))
    assert lff_be["steps"] == 25 and lff_be["eval_every"] > 25
    assert lff_be["committee_steps"] == 2 and lff_be["committee_members"] == 1
    vanilla = cell_overrides("vanilla", Cell("cmnist", "vanilla", batch_size=64))
    assert "committee_steps" not in vanilla and vanilla["batch_size"] == 64
    assert cell_overrides("vanilla", Cell("bar", "vanilla"))["backbone"] == "resnet18"


def test_projection_arithmetic():
    # Vanilla, paper preset: Colored MNIST 100 epochs x ceil(54,000 / 256) = 211 steps, 4
    # ratios; BAR a fixed 50,000 steps, 2 ratios; 3 seeds each
    assert run_steps("vanilla", "cmnist", 1.0) == 21_100
    assert run_steps("vanilla", "bar", 5.0) == 50_000
    grid = project({("cmnist", "vanilla"): 10.0, ("bar", "vanilla"): 20.0}, devices=4)
    cmnist, bar = grid.cells
    assert cmnist.runs == 12 and cmnist.run_seconds == [211.0] * 4
    assert bar.runs == 6 and bar.run_seconds == [1000.0, 1000.0]
    assert grid.total_seconds == pytest.approx(12 * 211.0 + 6 * 1000.0)  # 8,532 s
    assert grid.seconds_on(1) == pytest.approx(8532.0)
    assert grid.seconds_on(4) == pytest.approx(8532.0 / 4)
    assert grid.seconds_on(100) == pytest.approx(1000.0)  # never below the longest run
    assert grid.to_dict()["seconds_on_devices"] == pytest.approx(2133.0)


def test_cli_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "perf.json"
    args = "--datasets cmnist --methods etf_debias --steps 2 --warmup 1 --repeats 1 --threads 1"
    args += " --min-time 0"
    assert main(["perf", *args.split(), "--json", str(out), "--project", "--devices", "2"]) == 0
    printed = capsys.readouterr()
    assert "| dataset" in printed.out and "bare PyTorch loop" in printed.out
    assert "cmnist: harness Vanilla vs bare loop:" in printed.out
    assert "(target >= 0.90)" in printed.out and "on 2 devices" in printed.out
    assert "[3/3] cmnist etf_debias" in printed.err  # progress on stderr, a line per cell
    data = json.loads(out.read_text())
    assert [m["method"] for m in data["measurements"]] == [BARE, "vanilla", "etf_debias"]
    assert all(m["steps_per_s"] > 0 and m["peak_mb"] > 0 for m in data["measurements"])
    assert data["threads"] == 1 and data["steps"] == 2 and data["device_type"] == "cpu"
    assert data["harness_vs_bare"]["cmnist"]["speed"] > 0
    assert {c["method"] for c in data["projection"]["cells"]} == {"vanilla", "etf_debias"}


def test_cli_reports_cells_that_did_not_finish(capsys):
    args = "--datasets cmnist --methods etf_debias --repeats 1 --cell-timeout 0.5"
    assert main(["perf", *args.split()]) == 1  # a cell that did not finish fails the command
    out = capsys.readouterr().out
    assert "timed out after 0.5 s (--cell-timeout)" in out  # in the table's note column
    assert "cmnist etf_debias: not measured (timed out after 0.5 s" in out  # and the projection's


def test_a_stopped_perf_keeps_the_cells_it_measured(tmp_path):
    """SIGTERM (a job's time limit) after the first cell: what was measured is still
    summarised and written, the JSON says how many cells were planned, and the exit code says
    it was stopped. The signal lands during a cell or between two; seven cells of at least a
    second each keep it from landing after the last."""
    out = tmp_path / "perf.json"
    args = "--datasets cmnist --methods etf_debias --steps 2 --warmup 1 --threads 1"
    args += " --repeats 3 --min-time 1"
    perf = subprocess.Popen(
        [sys.executable, "-m", "debias_bench.cli", "perf", *args.split(), "--json", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert perf.stderr is not None
    for line in perf.stderr:
        if line.startswith("[1/7]"):
            perf.send_signal(signal.SIGTERM)
            break
    stdout, stderr = perf.communicate(timeout=120)
    assert perf.returncode == 130, stderr
    stopped = re.search(r"stopped after (\d) cells? of 7", stderr)
    assert stopped, stderr
    measured = int(stopped[1])
    assert f"stopped: {measured} of 7 cells measured" in stderr
    assert "bare PyTorch loop" in stdout and "| cmnist    | etf_debias" not in stdout
    data = json.loads(out.read_text())
    assert data["cells_planned"] == 7 and len(data["measurements"]) == measured >= 1


def test_cli_unknown_method_is_a_clear_error(capsys):
    assert main(["perf", "--methods", "vanila", "--datasets", "cmnist"]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'vanila'" in err and "did you mean 'vanilla'" in err
    assert "[1/" not in err  # nothing ran


def test_cli_refuses_a_projection_at_another_batch_size(capsys):
    assert main(["perf", "--datasets", "cmnist", "--batch-size", "64", "--project"]) == 2
    assert "--project needs the paper batch sizes" in capsys.readouterr().err
