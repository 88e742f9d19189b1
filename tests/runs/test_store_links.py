"""A symbolic link put in a run folder (a shared store: anyone who can write there) never makes
the sweep's owner write through it: every file the harness opens for writing or appending in a
run folder is opened without following a link (``debias_bench.runs.nofollow``), the link
replaced by the harness's own file, as the atomic writes of ``status.json`` and ``result.json``
replace one."""

from __future__ import annotations

import os
import threading

import pytest
from support.planted import plant
from support.scripted import bench_args, statuses

from debias_bench.launchers.forkserver import START_ENV
from debias_bench.runs.nofollow import open_own
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

PRECIOUS = "the owner's file\n"


@pytest.fixture
def elsewhere(tmp_path):
    """A file of the owner's outside the store, and a path outside it where nothing is."""
    victim = tmp_path / "elsewhere" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text(PRECIOUS)
    return victim, tmp_path / "elsewhere" / "created-by-bench"


def _link(path, target) -> None:
    if os.path.lexists(path):
        path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_a_rerun_never_writes_through_links_in_its_run_folder(
    tmp_path, in_process, monkeypatch, elsewhere, start
):
    """``--launcher local``: the worker's logs linked to a file elsewhere, ``.lock`` and
    ``metrics.jsonl`` to a file that does not exist. The rerun trains the run; the file
    elsewhere is untouched, nothing is created there, and the run's files are its own."""
    victim, nowhere = elsewhere
    monkeypatch.setenv(START_ENV, start)
    out, local = tmp_path / "runs", ["--launcher", "local", "--workers", "1"]
    code, _, err = in_process("run", *bench_args(out, "5"), *local)  # flaky: fails once
    assert code == 1 and statuses(out)[5.0]["state"] == "failed", err
    (run,) = RunStore(out).runs()
    for name in ("stderr.log", "stdout.log"):
        _link(run.path / name, victim)
    for name in (".lock", "metrics.jsonl"):
        _link(run.path / name, nowhere)

    code, _, err = in_process("run", *bench_args(out, "5"), *local, "--retry-failed")
    assert code == 0 and run.effective_state() is RunState.DONE, err
    assert victim.read_text() == PRECIOUS and not os.path.lexists(nowhere)
    for name in ("stderr.log", "stdout.log", ".lock", "metrics.jsonl"):
        assert not (run.path / name).is_symlink(), name
    assert f"{start} worker started" in run.stderr_path.read_text()
    assert [r["step"] for r in run.metrics()] == [10, 20, 30, 40]


def test_temporary_files_and_locks_are_never_written_through_links(tmp_path, elsewhere):
    """The temporary file of an atomic write (``status.json``, ``tracking.json``, the
    checkpoint) has a predictable name; a link planted under it is not written through. A
    dangling ``.lock`` creates nothing; a linked ``stderr.log`` is not read into a status."""
    victim, nowhere = elsewhere
    run = plant(RunStore(tmp_path / "runs"))
    pid, thread = os.getpid(), threading.get_ident()
    _link(run.path / f".status.json.{pid}.{thread}.tmp", victim)
    _link(run.path / f".tracking.json.{pid}.{thread}.tmp", victim)
    _link(run.path / f".checkpoint.{pid}.tmp", victim)
    _link(run.lock_path, nowhere)
    with run.claim() as owned:
        assert owned
        run.transition(RunState.RUNNING, attempt=1)
        run.set_tracking("mlflow", {"step": 1})
        run.save_checkpoint({"step": 1})
    assert victim.read_text() == PRECIOUS and not os.path.lexists(nowhere)
    assert run.status()["state"] == "running" and run.tracking() == {"mlflow": {"step": 1}}
    assert run.load_checkpoint()["step"] == 1 and not run.lock_path.is_symlink()
    assert not list(run.path.glob(".*.tmp"))

    _link(run.stderr_path, victim)
    assert run.log_tail() == ""  # the owner's file is never copied into status.json
    _link(run.path / "superseded", victim.parent)
    run.retire()
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]
    assert (run.path / "superseded").is_dir() and not (run.path / "superseded").is_symlink()


def test_open_own_removes_the_link_never_its_target(tmp_path, elsewhere):
    victim, _ = elsewhere
    path = tmp_path / "stderr.log"
    path.symlink_to(victim)
    os.close(open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT))
    assert path.is_file() and not path.is_symlink() and victim.read_text() == PRECIOUS
    path.write_text("left by a dead process")
    os.close(open_own(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))  # a temporary file
    assert path.read_text() == ""
