"""Store faults stay local and named (issue 14, items 6 and 7).

One test per fault: a truncated ``status.json``, ``result.json`` or ``config.json``, a deleted
``config.json``, a torn line in ``metrics.jsonl``, a retry after deleting a checkpoint, and a
full disk. Each checks the run's state and message, the exit code of the commands involved,
that no traceback is printed, and that every other run's files are byte-identical afterwards.

The file faults use real Colored MNIST runs of the ``ci`` preset, through the ``bench`` console
script; the metrics and disk faults use the in-memory ``toy`` dataset (``conftest.py``) in
process, where the disk can be made full by patching the store's ``fsync``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from support.asserts import assert_close_nested
from support.processes import run_bench

from debias_bench.cli import main
from debias_bench.config.run_config import make_config
from debias_bench.errors import FailReason, Interrupted
from debias_bench.launchers.run_one import run_one
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run

CI_GRID = [
    "--methods", "vanilla", "--datasets", "cmnist", "--ratios", "5", "--seeds", "0,1,2",
    "--preset", "ci", "--protocol", "clean", "--device", "cpu",
]  # fmt: skip


bench = run_bench


def snapshot(root: Path, *skip: str) -> dict[str, bytes]:
    """Every file of every run under ``root`` except the runs ``skip``, by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in skip
    }


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr


# ----------------------------------------------------------------------------- real runs
@pytest.fixture(scope="module")
def ci_store(tmp_path_factory, raw_root, data_root) -> tuple[Path, dict[str, str]]:
    """Three finished ``ci`` runs (vanilla, Colored MNIST 5 %, seeds 0-2), built once."""
    env = {**os.environ, "BENCH_RAW_ROOT": str(raw_root), "BENCH_DATA_ROOT": str(data_root)}
    root = tmp_path_factory.mktemp("ci") / "runs"
    proc = bench("run", *CI_GRID, "--out", str(root), env=env)
    assert proc.returncode == 0, proc.stderr
    return root, env


@pytest.fixture
def store(ci_store, tmp_path) -> tuple[Path, dict[str, str], list[str]]:
    """A copy of the three runs (run ids in seed order) that a test may break."""
    root, env = ci_store
    copy = tmp_path / "runs"
    shutil.copytree(root, copy)
    ids = sorted(p.name for p in copy.iterdir())
    ids.sort(key=lambda i: int(i.split("_s")[-1].split("_")[0]))
    return copy, env, ids


def _truncate(path: Path) -> bytes:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return data


def _status_shows_corrupt(capsys, root: Path, run_id: str, name: str) -> None:
    """``bench status`` (in this process: a traceback would fail the test) lists the run as
    corrupt with the file and the fix, and the other runs as done."""
    capsys.readouterr()
    assert main(["status", "--out", str(root)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith(f"| {run_id}"))
    assert "| corrupt" in row and name in row
    assert f"mv {root / run_id}" in out  # the fix, with the path to move
    assert out.count("| done") == 2
    assert main(["status", "--out", str(root), "--failed"]) == 0
    failed = capsys.readouterr().out
    assert f"{run_id}  corrupt" in failed and name in failed


def _report_lists_corrupt(capsys, root: Path, run_id: str, name: str) -> None:
    capsys.readouterr()
    assert main(["report", "--out", str(root), "--table", "synthetic"]) == 0
    out = capsys.readouterr().out
    assert f"{run_id}: corrupt ({run_id}/{name}" in out
    assert "n=2" in out.replace(" ", "")  # two seeds averaged, not three


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.parametrize("name", ["status.json", "result.json", "config.json"])
def test_truncated_file_is_corrupt_then_redone_after_moving_it_aside(store, capsys, name):
    root, env, ids = store
    bad = root / ids[1] / name
    result_before = json.loads((root / ids[1] / "result.json").read_text())
    original = _truncate(bad)
    others = snapshot(root, ids[1])

    _status_shows_corrupt(capsys, root, ids[1], name)
    _report_lists_corrupt(capsys, root, ids[1], name)
    proc = bench("run", *CI_GRID, "--out", str(root), env=env)
    no_traceback(proc)
    assert proc.returncode == 1  # not every run is done
    assert "corrupt" in proc.stdout and f"mv {bad}" in proc.stdout + proc.stderr
    assert bad.read_bytes() == original[: len(original) // 2]  # the evidence is left alone
    assert snapshot(root, ids[1]) == others

    bad.rename(bad.with_name(name + ".bad"))  # the fix the message gives
    proc = bench("run", *CI_GRID, "--out", str(root), env=env)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    run = RunStore(root).run(ids[1])
    assert run.effective_state() is RunState.DONE
    assert_close_nested(run.result()["selections"], result_before["selections"])
    assert snapshot(root, ids[1]) == others


@pytest.mark.realdata
@pytest.mark.slow
def test_deleted_config_is_shown_and_rewritten_by_bench_run(store, capsys):
    root, env, ids = store
    config = json.loads((root / ids[2] / "config.json").read_text())
    (root / ids[2] / "config.json").unlink()
    others = snapshot(root, ids[2])

    _status_shows_corrupt(capsys, root, ids[2], "config.json is missing")
    _report_lists_corrupt(capsys, root, ids[2], "config.json")
    proc = bench("run", *CI_GRID, "--out", str(root), env=env)  # its id is its config's hash
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    rewritten = json.loads((root / ids[2] / "config.json").read_text())
    recorded_at_run_time = ("provenance", "data_fingerprint")  # result.json keeps the latter
    assert {k: v for k, v in rewritten.items() if k not in recorded_at_run_time} == {
        k: v for k, v in config.items() if k not in recorded_at_run_time
    }
    assert RunStore(root).run(ids[2]).effective_state() is RunState.DONE
    assert snapshot(root, ids[2]) == others


# ----------------------------------------------------------------------------- toy runs
TINY = {"steps": 24, "eval_every": 8, "batch_size": 32}
CPU = torch.device("cpu")


class _Payload:
    """A pickle that runs a shell command when it is unpickled (what a hostile checkpoint
    carries)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.realdata
@pytest.mark.parametrize("state", ["unfinished", "done"])
def test_a_checkpoint_carrying_a_pickle_payload_is_corrupt_and_never_run(store, capsys, state):
    """Issue 36.1: run stores are shared; reading one (`bench status`, `report`, `regress`,
    `reproduce export`, `run`) must never execute code a checkpoint carries."""
    root, env, ids = store
    run = root / ids[1]
    marker = root.parent / "payload-ran"
    if state == "unfinished":
        (run / "result.json").unlink()  # the checkpoint is what a resume would read
    with open(run / "checkpoint.pt", "wb") as handle:
        torch.save({"stamp": {"run_id": ids[1]}, "payload": _Payload(marker)}, handle)

    capsys.readouterr()
    assert main(["status", "--out", str(root)]) == 0
    out = capsys.readouterr().out
    if state == "unfinished":
        row = next(line for line in out.splitlines() if line.startswith(f"| {ids[1]}"))
        assert "| corrupt" in row and "checkpoint.pt" in row
    assert main(["report", "--out", str(root), "--table", "synthetic"]) == 0
    for command in (
        ["regress", "record", "--allow-unfinished", "-o", str(root.parent / "b.json")],
        ["reproduce", "export", "-o", str(root.parent / "r.csv")],
        ["track", "export", "--to", f"tensorboard={root.parent / 'tb'}"],
    ):
        no_traceback(bench(*command, "--out", str(root), env=env))
    proc = bench("run", *CI_GRID, "--out", str(root), env=env)
    no_traceback(proc)
    assert not marker.exists(), "a checkpoint's pickle ran code"
    if state == "unfinished":
        assert proc.returncode == 1
        assert "checkpoint.pt: it names posix.system" in proc.stdout + proc.stderr


def _edit_result(path: Path, edit) -> None:
    result = json.loads(path.read_text())
    edit(result["selections"]["last"]["test"])
    path.write_text(json.dumps(result))


@pytest.mark.realdata
@pytest.mark.parametrize("what", ["accuracy", "every number of the split"])
def test_a_hand_edited_result_is_corrupt(store, capsys, what):
    """Issue 36.5: a result is checked against itself (overall vs aligned / conflicting and
    group accuracies weighted by their counts) and against the evaluation it was taken from in
    ``metrics.jsonl``; an edit that keeps the split consistent is caught by the second."""
    root, _, ids = store
    path = root / ids[1] / "result.json"

    def edit(test: dict) -> None:
        test["accuracy"] = 91.5
        if what != "accuracy":
            test["aligned_accuracy"] = test["conflicting_accuracy"] = 91.5
            test["group_accuracy"] = [
                [None if acc is None else 91.5 for acc in row] for row in test["group_accuracy"]
            ]

    _edit_result(path, edit)
    _status_shows_corrupt(capsys, root, ids[1], "result.json")
    with pytest.raises(Exception, match="edited number"):
        RunStore(root).run(ids[1]).result()
    _report_lists_corrupt(capsys, root, ids[1], "result.json")
    assert "91.5" not in capsys.readouterr().out


def _config(seed: int = 0, method: str = "vanilla"):
    return make_config(method, "toy", 20, seed, protocol="clean", overrides=TINY)


def _interrupted_at(store: RunStore, config, toy_place, step: int):
    with pytest.raises(Interrupted):
        run_one(config, store, toy_place, CPU, should_stop=lambda s: s == step)
    return store.run(config.run_id)


def _selections_and_metrics(run_dir) -> tuple[dict, list[dict]]:
    keep = ("step", "train", "valid", "test")
    return run_dir.result()["selections"], [{k: r[k] for k in keep} for r in run_dir.metrics()]


def _beside_a_done_run(tmp_path: Path, toy_place) -> tuple:
    """An ETF-Debias config trained whole in a store of its own (the numbers a resume must
    reach), and a store holding another, done run: (config, whole run, store, that done run,
    a snapshot of the store without the config's run)."""
    config = _config(method="etf_debias")
    whole = RunStore(tmp_path / "whole").run(config.run_id)
    train_run(config, whole, toy_place, CPU)
    store = RunStore(tmp_path / "runs")
    done = run_one(_config(seed=1), store, toy_place, CPU).run_dir
    return config, whole, store, done, snapshot(store.root, config.run_id)


def test_torn_metrics_line_loses_no_later_record_on_resume(tmp_path, toy_place):
    config, whole, store, done, others = _beside_a_done_run(tmp_path, toy_place)

    run = _interrupted_at(store, config, toy_place, 16)
    lines = run.metrics_path.read_text().splitlines(keepends=True)
    assert len(lines) == 2
    # a crash mid-append left a torn line before the record of step 16, and one at the end
    run.metrics_path.write_text(lines[0] + lines[1][:40] + "\n" + lines[1] + lines[1][:25])
    assert [r["step"] for r in run.metrics()] == [8, 16]  # the later record is still read
    # an older store: the next append continued the torn line (no newline in between)
    glued = RunStore(tmp_path / "glued").run("x")
    glued.path.mkdir(parents=True)
    glued.metrics_path.write_text(lines[0] + lines[0][:30] + lines[1])
    assert [r["step"] for r in glued.metrics()] == [8, 16]

    outcome = run_one(config, store, toy_place, CPU)
    assert outcome.state is RunState.DONE and outcome.ran
    assert [r["step"] for r in run.metrics()] == [8, 16, 24]
    assert_close_nested(_selections_and_metrics(run), _selections_and_metrics(whole))
    assert json.loads(done.result_path.read_text())  # the other run is untouched
    assert snapshot(store.root, config.run_id) == others


@pytest.mark.parametrize("how", ["interrupted", "failed"])
def test_retry_after_deleting_the_checkpoint_does_not_duplicate_records(
    tmp_path, toy_place, monkeypatch, how
):
    config, whole, store, done, others = _beside_a_done_run(tmp_path, toy_place)

    retry = False
    if how == "interrupted":
        run = _interrupted_at(store, config, toy_place, 16)
    else:  # a crash right after the evaluation at step 16
        from debias_bench.runs.run_dir import RunDir

        append = RunDir.append_metrics

        def crash_after_16(self, record):
            append(self, record)
            if record["step"] == 16:
                raise RuntimeError("simulated crash")

        monkeypatch.setattr(RunDir, "append_metrics", crash_after_16)
        outcome = run_one(config, store, toy_place, CPU)
        assert outcome.state is RunState.FAILED and "simulated crash" in outcome.note
        monkeypatch.setattr(RunDir, "append_metrics", append)
        run, retry = outcome.run_dir, True
    assert [r["step"] for r in run.metrics()] == [8, 16]
    run.checkpoint_path.unlink()  # e.g. to restart it from scratch

    outcome = run_one(config, store, toy_place, CPU, retry_failed=retry)
    assert outcome.state is RunState.DONE
    assert [r["step"] for r in run.metrics()] == [8, 16, 24]  # not 8, 16, 8, 16, 24
    assert_close_nested(_selections_and_metrics(run), _selections_and_metrics(whole))
    assert snapshot(store.root, config.run_id) == others
    assert done.effective_state() is RunState.DONE


def _full_disk(monkeypatch, where: str, only: str = "") -> list[str]:
    """Make every store write under ``where`` (whose file name contains ``only``) fail with
    ENOSPC at its fsync, as a full disk does; returns the paths that failed."""
    import debias_bench.runs.run_dir as store_module

    failed: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(where) and only in Path(path).name:
            failed.append(path)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(store_module.os, "fsync", fsync)
    return failed


TOY_GRID = [
    "--methods", "vanilla", "--datasets", "toy", "--ratios", "20", "--seeds", "0,1",
    "--protocol", "clean", "--device", "cpu",
    *(f"--set={k}={v}" for k, v in TINY.items()),
]  # fmt: skip


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
@pytest.mark.parametrize("what", ["checkpoint", "everything"])
def test_disk_full_fails_that_run_and_keeps_finished_results(tmp_path, monkeypatch, capsys, what):
    out = tmp_path / "runs"
    assert main(["run", *TOY_GRID[:7], "0", *TOY_GRID[8:], "--out", str(out)]) == 0
    (finished,) = list(RunStore(out).runs())
    others = snapshot(out, "none")
    only = "checkpoint" if what == "checkpoint" else ""
    failed = _full_disk(monkeypatch, str(out / "toy_vanilla_r20_s1_"), only)
    capsys.readouterr()

    rc = main(["run", *TOY_GRID, "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 1
    assert "Traceback" not in captured.out + captured.err
    assert failed  # the fault did happen
    (target,) = [p.name for p in out.glob("toy_vanilla_r20_s1_*")]
    run = RunStore(out).run(target)
    assert not list(run.path.glob(".*.tmp"))  # no temporary file left behind
    assert snapshot(out, target) == others  # the finished run: byte-identical
    assert finished.effective_state() is RunState.DONE and finished.result()
    if what == "checkpoint":  # the status could still be written: failed, disk full
        status = run.status()
        assert status["state"] == RunState.FAILED and status["reason"] == FailReason.DISK_FULL
        assert str(run.checkpoint_path) in status["error"] and "[Errno 28]" in status["error"]
        assert "disk full" in captured.out
        monkeypatch.undo()
        assert main(["status", "--out", str(out), "--failed"]) == 0
        shown = capsys.readouterr().out
        assert f"{target}  failed (disk full)" in shown and "[Errno 28]" in shown
    else:  # nothing could be written: the outcome says so; the run is not left "running"
        text = captured.out + captured.err
        assert f"disk full: cannot write {run.path}" in text and "[Errno 28]" in text
        assert run.effective_state() in (RunState.PENDING, RunState.DEAD)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 4 MiB tmpfs: a file system that really fills up (needs root; skipped otherwise)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_really_full_disk_fails_the_run_and_a_retry_finishes_it(tmp_path, tiny_disk, capsys):
    """No patching: the store lives on a tmpfs left with 128 KiB, less than a checkpoint."""
    out = tiny_disk / "runs"
    assert main(["run", *TOY_GRID[:7], "0", *TOY_GRID[8:], "--out", str(out)]) == 0
    others = snapshot(out)
    stat = os.statvfs(tiny_disk)
    filler = tiny_disk / "filler"
    filler.write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 128 * 1024))
    capsys.readouterr()

    assert main(["run", *TOY_GRID, "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    (target,) = [p.name for p in out.glob("toy_vanilla_r20_s1_*")]
    run = RunStore(out).run(target)
    status = run.status()
    assert status["state"] == RunState.FAILED and status["reason"] == FailReason.DISK_FULL
    assert f"cannot write {run.checkpoint_path}: [Errno 28]" in status["error"]
    assert not list(out.rglob(".*.tmp"))
    assert snapshot(out, target) == others

    filler.unlink()  # room again: the failed run is retried on request, and finishes
    assert main(["run", *TOY_GRID, "--out", str(out), "--retry-failed"]) == 0
    assert run.effective_state() is RunState.DONE
    assert [r["step"] for r in run.metrics()] == [8, 16, 24]
    assert snapshot(out, target) == others
