"""Issue 48's fault matrix, the cases `bench run` settles before a run starts: absurd float
hyperparameters, one bound on threads, a device that is not there, a parent without torch, a
launcher's flag under another launcher (exit 2, one `error:`, nothing created), and the size
of a grid (a `--dry-run` total, a warning above LARGE_GRID runs). In this process on the toy
dataset of conftest, except the no-torch case (a fresh interpreter)."""

from __future__ import annotations

import pytest
import torch
from support.no_torch import bench_without_torch

from debias_bench.cli import main
from debias_bench.config.grid import LARGE_GRID
from debias_bench.config.hparams import ENGINE_HPARAMS, MAX_FLOAT, MAX_THREADS, declarations
from debias_bench.errors import ConfigError
from debias_bench.launchers.factories import LAUNCHERS
from debias_bench.registry import METHODS
from debias_bench.training.devices import INSTALL_TORCH

TOY = ["--methods", "vanilla", "--datasets", "toy", "--ratios", "5", "--device", "cpu"]
TOY += ["--set", "steps=2"]  # were a check to fail, the run it lets through is short


@pytest.fixture
def bench(tmp_path, monkeypatch, capsys):
    """`bench ARGS` in this process with its data under ``tmp_path``: (exit code, out, err)."""
    monkeypatch.setenv("BENCH_RAW_ROOT", str(tmp_path / "raw"))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.delenv("BENCH_PLUGINS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return call


def refused(result: tuple[int, str, str], *needles: str) -> str:
    """Exit 2 with one `error:` that holds every needle, and no traceback."""
    code, out, err = result
    assert code == 2, (code, out, err)
    assert len([line for line in err.splitlines() if line.startswith("error: ")]) == 1, err
    assert "Traceback" not in err + out, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# ---------------------------------------------------------------- absurd floats
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("lr=1e308", "lr=1e+308 is not valid (lr is float > 0 and <= 1000000)"),
        ("weight_decay=1e300", "weight_decay is float >= 0 and <= 1000000"),
        ("lr_gamma=1e9", "lr_gamma is float > 0 and <= 1000000"),
        ("lr_step_epochs=1e9", "lr_step_epochs is float > 0 and <= 10000 or null"),
    ],
)
def test_an_absurd_float_hyperparameter_is_refused_with_its_range(
    bench, tmp_path, value, message, dry_run
):
    """``--set lr=1e308`` was accepted, then crashed the optimiser with an overflow."""
    out = tmp_path / "runs"
    args = ["run", *TOY, "--out", str(out), "--set", value] + (["--dry-run"] if dry_run else [])
    refused(bench(*args), message)
    assert not out.exists()


def test_every_declared_float_has_a_finite_maximum():
    """The engine's and every method's: MAX_FLOAT unless a key declares a tighter one; a
    huge but finite rate (the divergence test's lr=1e6) stays valid and fails as diverged."""
    for entry in METHODS:
        for param in declarations(entry.obj.Params):
            if param.kind == "float":
                assert param.high is not None and param.high <= MAX_FLOAT, (entry.name, param)
    lr = next(p for p in ENGINE_HPARAMS if p.name == "lr")
    assert lr.parse(1e6, "x") == 1e6 and lr.parse(1.0e-3, "x") == 1.0e-3


# ---------------------------------------------------------------- one bound on threads
def test_the_thread_bound_has_one_home():
    (threads,) = [o for o in LAUNCHERS.get("local").options if o.name == "threads"]
    assert threads.parse(str(MAX_THREADS), "local") == MAX_THREADS
    with pytest.raises(ConfigError, match=f"<= {MAX_THREADS}"):
        threads.parse(str(MAX_THREADS + 1), "local")
    (num_threads,) = [p for p in ENGINE_HPARAMS if p.name == "num_threads"]
    assert num_threads.high == MAX_THREADS


@pytest.mark.parametrize(
    ("extra", "env", "message"),
    [
        (["--set", "num_threads=100000"], None, f"num_threads is int >= 1 and <= {MAX_THREADS}"),
        ([], "100000", "OMP_NUM_THREADS=100000 is more threads than bench gives a run (at most "),
        (["--launcher", "local", "--threads", "1025"], None, f"<= {MAX_THREADS}, not '1025'"),
    ],
    ids=["set-num_threads", "OMP_NUM_THREADS", "--threads"],
)
def test_too_many_threads_are_refused_up_front(bench, tmp_path, monkeypatch, extra, env, message):
    if env is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    out = tmp_path / "runs"
    refused(bench("run", *TOY, "--out", str(out), *extra), message)
    assert not out.exists() and not (tmp_path / "data").exists()


# ---------------------------------------------------------------- devices
def _absent_devices() -> list[str]:
    absent = ["cuda:99"]  # refused as missing wherever there are fewer GPUs
    if not torch.backends.mps.is_available():
        absent.append("mps")
    if not torch.cuda.is_available():
        absent.append("cuda")
    return absent


@pytest.mark.parametrize("device", _absent_devices())
def test_a_device_that_is_not_there_is_refused_and_the_corrected_rerun_trains(
    bench, tmp_path, device
):
    """``--device mps`` used to fail its run (exit 1), which then blocked the rerun with
    ``--device cpu`` until ``--retry-failed``."""
    out = tmp_path / "runs"
    args = ["run", *TOY, "--out", str(out)]
    refused(bench(*args, "--device", device), f"--device {device}", "use --device cpu")
    assert not out.exists() and not (tmp_path / "data").exists()
    code, _, err = bench(*args)  # the same grid on the CPU, no --retry-failed
    assert code == 0 and "1 ran, 0 failed" in err, err


# ---------------------------------------------------------------- a parent without torch
def test_bench_run_without_torch_is_one_error_with_the_install_command(tmp_path):
    out = tmp_path / "runs"
    grid = ["--methods", "vanilla", "--datasets", "cmnist", "--ratios", "5", "--device", "cpu"]
    done = bench_without_torch(tmp_path, "run", *grid, "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line, hint) = done.stderr.strip().splitlines()[-2:]
    assert line.startswith("error: torch cannot be imported (ImportError: "), done.stderr
    assert INSTALL_TORCH in hint
    assert not out.exists()
    listed = bench_without_torch(tmp_path, "run", *grid, "--out", str(out), "--dry-run")
    assert listed.returncode == 0 and listed.stdout.startswith("todo"), listed.stderr


# ---------------------------------------------------------------- launchers' own flags
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--threads", "1"], "--threads is a flag of --launcher local: --launcher inline does"),
        (["--launcher", "inline", "--workers", "2", "--threads", "1"], "--workers, --threads are"),
        (["--launcher", "slurm", "--threads", "1"], "--launcher slurm does not use it"),
        (
            ["--launcher", "local", "--partition", "gpu"],
            "--partition is a flag of --launcher",
        ),
    ],
    ids=["threads-inline", "two-flags", "threads-slurm", "partition-local"],
)
def test_a_flag_of_another_launcher_is_refused(bench, tmp_path, extra, message):
    """``--threads 1`` under inline was accepted (exit 0) and did nothing."""
    out = tmp_path / "runs"
    refused(bench("run", *TOY, "--out", str(out), *extra), message, "add --launcher ")
    assert not out.exists()


def test_a_launchers_own_flag_still_passes(bench, tmp_path):
    code, _, err = bench(
        "run", *TOY, "--out", str(tmp_path / "runs"), "--launcher", "local", "--threads", "1"
    )
    assert code == 0, err


# ---------------------------------------------------------------- the size of a grid
def test_a_dry_run_prints_the_total_with_todo_and_done(bench, tmp_path):
    out = tmp_path / "runs"
    assert bench("run", *TOY, "--out", str(out))[0] == 0  # seed 0 done
    code, listed, err = bench("run", *TOY, "--out", str(out), "--seeds", "0,1,2", "--dry-run")
    assert code == 0 and len(listed.splitlines()) == 3, err
    assert "3 runs (1 method, 1 dataset, 1 ratio, 3 seeds): 2 todo, 1 done" in err


def test_a_grid_over_the_threshold_is_warned_before_any_folder(bench, tmp_path):
    out = tmp_path / "runs"
    seeds = ",".join(map(str, range(LARGE_GRID + 1)))
    code, _, err = bench("run", *TOY, "--out", str(out), "--seeds", seeds, "--dry-run")
    assert code == 0
    (warning,) = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert f"a grid of {LARGE_GRID + 1:,} runs (1 method, 1 dataset, 1 ratio" in warning
    # the warning comes before the sweep makes anything (here a check stops it first)
    err = refused(bench("run", *TOY, "--out", str(out), "--seeds", seeds, "--device", "cuda:99"))
    assert err.index("warning: a grid of") < err.index("error: ")
    assert not out.exists()
    seeds = ",".join(map(str, range(LARGE_GRID)))
    code, _, err = bench("run", *TOY, "--out", str(out), "--seeds", seeds, "--dry-run")
    assert code == 0 and "warning" not in err
