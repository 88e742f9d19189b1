"""Fault injection over the inline and local launchers: each row of ``FAULTS`` says how a
fault is injected, the state the run must end in (as ``bench run``, ``bench status`` and
``bench report`` all see it), the exit code of the sweep, and what must never appear. The
README's table "What bench guarantees under faults" is this table.

The runs are real (Vanilla, or the misbehaving ``faulty`` plugin method of
``faulty_methods.py``, on the tiny scripted dataset of ``support.scripted``).
"""

from __future__ import annotations

import json
import os
import posix
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.scripted import bench_args

from debias_bench.launchers.run_one import ExitCalled, exits_raise
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

LAUNCHERS = {
    "inline": ["--launcher", "inline"],
    "local": ["--launcher", "local", "--workers", "1", "--timeout", "60"],
}


@pytest.fixture
def bench(in_process, monkeypatch):
    """``bench`` in this process, with the faulty plugin method loaded (workers too)."""
    monkeypatch.setenv("BENCH_PLUGINS", "support.scripted,support.faulty_methods")
    return in_process


def runs(out: Path) -> dict[int, RunDir]:
    """seed -> run folder (read by the run id's seed: a corrupt config cannot be trusted)."""
    return {int(d.run_id.split("_s")[-1].split("_")[0]): d for d in RunStore(out).runs()}


def copy_run_over_another(out: Path) -> None:
    """A finished run's folder copied under another run's name (seed 1 <- seed 0)."""
    found = runs(out)
    shutil.rmtree(found[1].path)
    shutil.copytree(found[0].path, found[1].path)


def edit_config(out: Path) -> None:
    """config.json of seed 1 edited by hand (its lr)."""
    config_path = runs(out)[1].config_path
    config = json.loads(config_path.read_text())
    config["hparams"]["lr"] = 0.5
    config_path.write_text(json.dumps(config))


def foreign_checkpoint(out: Path) -> None:
    """Seed 1 unfinished (result and status moved away) holding seed 0's checkpoint."""
    found = runs(out)
    found[1].result_path.unlink()
    found[1].status_path.unlink()
    shutil.copy(found[0].checkpoint_path, found[1].checkpoint_path)


def torn_result(out: Path) -> None:
    """Seed 1's result.json torn mid-write, and missing its best_valid selection on top."""
    result = runs(out)[1].result_path
    result.write_text(result.read_text()[:200])


@dataclass(frozen=True)
class Fault:
    name: str
    #: the sweep that makes the runs (seeds 0 and 1); the fault is injected after it
    args: tuple[str, ...]
    inject: Callable[[Path], None] | None
    state: RunState  # seed 1's state afterwards, as every command sees it
    exit_code: int  # of `bench run` with the same grid after the fault
    says: str  # in the sweep's output
    reason: str | None = None  # status.json's reason for a failed run


FAULTS = [
    Fault("copied folder", (), copy_run_over_another, RunState.CORRUPT, 1, "does not match run id"),
    Fault("edited config", (), edit_config, RunState.CORRUPT, 1, "does not match run id"),
    Fault(
        "foreign checkpoint", (), foreign_checkpoint, RunState.CORRUPT, 1, "checkpoint.pt belongs"
    ),
    Fault("torn result", (), torn_result, RunState.CORRUPT, 1, "result.json is not valid JSON"),
    Fault(
        "predict: wrong shape",
        ("--methods", "faulty", "--set", "fault=shape"),
        None,
        RunState.FAILED,
        1,
        "expected float logits of shape",
        "bad predictions",
    ),
    Fault(
        "predict: NaN logits",
        ("--methods", "faulty", "--set", "fault=nonfinite"),
        None,
        RunState.FAILED,
        1,
        "non-finite logits",
        "bad predictions",
    ),
    Fault(
        "sys.exit() in method code",
        ("--methods", "faulty", "--set", "fault=exit"),
        None,
        RunState.FAILED,
        1,
        "sys.exit(3)",
        "crashed",
    ),
]


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_fault(tmp_path, bench, fault, launcher):
    out = tmp_path / "runs"
    args = [*bench_args(out, "1", seeds="0,1", steps=20), *fault.args, *LAUNCHERS[launcher]]
    code, _, err = bench("run", *args)
    if fault.inject is not None:
        assert code == 0, err
        before = {p: p.read_bytes() for p in runs(out)[0].path.glob("*.json*")}
        fault.inject(out)
        code, _, err = bench("run", *args)
        # the other run of the store is untouched
        assert {p: p.read_bytes() for p in runs(out)[0].path.glob("*.json*")} == before
    assert code == fault.exit_code, err
    assert fault.says in err and "Traceback" not in err
    seed1 = runs(out)[1]
    assert seed1.effective_state() is fault.state
    assert not seed1.is_done()
    if fault.reason:
        assert seed1.status()["reason"] == fault.reason
    # bench status agrees, and names the fault
    code, status, _ = bench("status", "--out", str(out))
    row = next(line for line in status.splitlines() if line.startswith(f"| {seed1.run_id}"))
    assert f"| {fault.state.value}" in row
    # bench report never averages it: the cell has one seed (or none), never ± 0.00
    code, report, _ = bench("report", "--out", str(out), "--table", "other", "--format", "markdown")
    assert "± 0.00" not in report


def test_the_fix_for_a_corrupt_run_trains_the_right_run(tmp_path, bench):
    out = tmp_path / "runs"
    args = [*bench_args(out, "1", seeds="0,1", steps=20), *LAUNCHERS["inline"]]
    assert bench("run", *args)[0] == 0
    copy_run_over_another(out)
    seed1 = runs(out)[1]
    code, _, err = bench("run", *args)
    assert code == 1 and f"mv {seed1.path} {seed1.path}.bad" in err
    seed1.path.rename(seed1.path.with_name(seed1.path.name + ".bad"))
    code, _, err = bench("run", *args)
    assert code == 0, err
    assert runs(out)[1].is_done() and runs(out)[1].result()["seed"] == 1


def test_an_interrupt_from_method_code_is_an_interrupted_run_and_a_nonzero_exit(tmp_path, bench):
    out = tmp_path / "runs"
    args = bench_args(out, "1", steps=20)
    code, summary, err = bench("run", *args, "--methods", "faulty", "--set", "fault=interrupt")
    assert code == 1 and "Traceback" not in err, err
    assert "keyboard interrupt; a rerun resumes" in summary and "1 interrupted" in err
    (run,) = RunStore(out).runs()
    assert run.effective_state() is RunState.INTERRUPTED


@pytest.mark.parametrize("seed", ["4294967296", "-1"])
def test_a_seed_out_of_range_is_refused_before_anything_exists(tmp_path, bench, seed):
    out = tmp_path / "runs"
    code, _, err = bench("run", *bench_args(out, "1", seeds=seed))
    assert code == 2 and ("2**32" in err or ">= 0" in err), err
    assert "Traceback" not in err and not out.exists()


def test_os_exit_in_a_run_raises_in_its_process_and_exits_a_forked_child():
    """Inside a run, ``os._exit`` in the process that trains it raises (the run is recorded,
    the sweep goes on: ``test_launch_faults`` has it end to end), while a child forked during
    the run (a DataLoader worker's ``multiprocessing`` bootstrap ends in ``os._exit``) still
    exits with its code. A code other than 0, so a broken guard fails the test run."""
    with exits_raise():
        with pytest.raises(ExitCalled) as called:
            os._exit(3)
        pid = os.fork()
        if pid == 0:
            os._exit(7)  # the child: the real one
        _, status = os.waitpid(pid, 0)
    assert called.value.code == 3 and os.waitstatus_to_exitcode(status) == 7
    assert os._exit is posix._exit and "guarded" not in repr(os._exit)  # put back
