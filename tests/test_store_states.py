"""Run states in one module: the state a run's files mean, what a sweep does with it, the
failure reasons recorded in status.json, and how ``bench status`` shows them."""

from __future__ import annotations

import errno
import json

import pytest

from debias_bench.cli import main
from debias_bench.errors import CorruptDataError
from debias_bench.states import (
    STALE_AFTER_S,
    SUCCESS,
    Facts,
    FailReason,
    RunFailure,
    RunState,
    classify,
    decide,
    effective_state,
    failure_reason,
)
from debias_bench.store import RunStore, write_atomic

S = RunState


@pytest.mark.parametrize(
    "facts,owned,expected",
    [
        (Facts(S.DONE, result_ok=True), False, S.DONE),
        (Facts(S.RUNNING, result_ok=True), False, S.DONE),  # result written, status not yet
        (Facts(S.DONE, result_ok=False), False, S.PENDING),  # its result was moved aside
        (Facts(S.DONE, result_ok=True, fault="x is torn"), False, S.CORRUPT),
        (Facts(S.FAILED, result_ok=False), False, S.FAILED),
        (Facts(S.RUNNING, False, lock_held=True), False, S.RUNNING),
        (Facts(S.RUNNING, False, lock_held=False), False, S.DEAD),
        (Facts(S.RUNNING, False, lock_held=True), True, S.DEAD),  # we hold the lock ourselves
        (Facts(S.RUNNING, False, lock_held=None, pid_alive=True), False, S.RUNNING),
        (Facts(S.RUNNING, False, lock_held=None, pid_alive=False), False, S.DEAD),
        (Facts(S.RUNNING, False, same_host=False, heartbeat_age_s=5.0), False, S.RUNNING),
        (
            Facts(S.RUNNING, False, same_host=False, heartbeat_age_s=STALE_AFTER_S + 1),
            False,
            S.DEAD,
        ),
    ],
)
def test_effective_state(facts, owned, expected):
    assert effective_state(facts, owned=owned) is expected


@pytest.mark.parametrize(
    "state,attempts,retry,expected_run,expected_state,record",
    [
        (S.DONE, 1, True, False, S.DONE, None),
        (S.CORRUPT, 1, True, False, S.CORRUPT, None),
        (S.RUNNING, 1, True, False, S.RUNNING, None),
        (S.FAILED, 1, False, False, S.FAILED, None),
        (S.FAILED, 1, True, True, S.FAILED, None),
        (S.FAILED, 3, True, False, S.FAILED, None),
        (S.DEAD, 1, False, True, S.DEAD, None),
        (S.DEAD, 3, False, False, S.FAILED, FailReason.DIED),
        (S.INTERRUPTED, 1, False, True, S.INTERRUPTED, None),
        (S.PENDING, 0, False, True, S.PENDING, None),
        (S.SKIPPED, 1, False, True, S.SKIPPED, None),
    ],
)
def test_decide(state, attempts, retry, expected_run, expected_state, record):
    decision = decide(state, attempts, retry, max_attempts=3, fault="f is torn")
    assert (decision.run, decision.state, decision.record_failure) == (
        expected_run,
        expected_state,
        record,
    )
    assert decision.new_attempt is (state is not S.INTERRUPTED)
    if state is S.CORRUPT:
        assert decision.note == "f is torn"


def test_states_are_strings_in_json_and_comparisons():
    assert S.DONE == "done" and json.dumps({"s": S.FAILED}) == '{"s": "failed"}'
    assert f"{S.CORRUPT}" == "corrupt" and str(FailReason.TIMED_OUT) == "timed out"
    assert {S.DONE, S.SKIPPED} == SUCCESS
    assert {s.value for s in S} == {
        "pending", "running", "done", "failed", "interrupted", "dead", "corrupt", "skipped"
    }  # fmt: skip


def test_classify_names_the_reason_path_and_errno():
    full = OSError(errno.ENOSPC, "No space left on device", "/runs/x/checkpoint.pt")
    assert classify(full)[:2] == (
        FailReason.DISK_FULL,
        "disk full: cannot write /runs/x/checkpoint.pt: [Errno 28] No space left on device",
    )
    diverged = RunFailure(FailReason.DIVERGED, "train loss is nan at step 120", step=120)
    assert classify(diverged) == (
        FailReason.DIVERGED,
        "train loss is nan at step 120",
        {"step": 120},
    )
    assert classify(ValueError("bad"))[:2] == (FailReason.CRASHED, "ValueError: bad")
    assert classify(FileNotFoundError(2, "No such file", "/data/x"))[0] is FailReason.CRASHED


def test_a_failed_write_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    import debias_bench.store as store

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "fsync", full)
    with pytest.raises(OSError) as info:
        write_atomic(tmp_path / "status.json", "{}")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "status.json")
    assert list(tmp_path.iterdir()) == []


def test_set_status_records_a_declared_reason(tmp_path):
    run = RunStore(tmp_path).run("r")
    run.write_config({})
    run.set_status(S.FAILED, reason=FailReason.DIVERGED, error="loss is inf at step 8", step=8)
    status = json.loads(run.status_path.read_text())
    assert (status["state"], status["reason"], status["step"]) == ("failed", "diverged", 8)
    run.set_status(S.FAILED, submitted_job_id="12")  # the reason is kept
    assert run.status()["reason"] == "diverged"
    run.set_status(S.RUNNING)  # and dropped when the run starts again
    assert "reason" not in run.status()
    with pytest.raises(ValueError):
        run.set_status(S.FAILED, reason="out of luck")  # not a declared reason
    assert failure_reason({"state": "failed", "error": "timed out after 5 s (killed)"}) == (
        FailReason.TIMED_OUT
    )  # a status written before reasons were recorded
    assert failure_reason({"state": "failed", "error": "boom"}) is FailReason.CRASHED


@pytest.mark.parametrize(
    "text,problem",
    [
        ("", "not valid JSON"),
        ('{"state": "runn', "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"state": "exploded"}', "unknown state"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_unreadable_status_is_corrupt_with_the_fix(tmp_path, text, problem):
    run = RunStore(tmp_path).run("r")
    run.write_config({})
    if isinstance(text, bytes):
        run.status_path.write_bytes(text)
    else:
        run.status_path.write_text(text)
    assert run.effective_state() is S.CORRUPT
    assert problem in run.fault() and f"mv {run.status_path} {run.status_path}.bad" in run.fault()
    with pytest.raises(CorruptDataError):
        run.status()


@pytest.mark.parametrize(
    "result,problem",
    [
        ('{"selections": {"last": {"valid": {"accuracy": NaN}}}}', "holds NaN"),
        ('{"selections": {}}', "has no selections"),
        ('{"selections": {"last": {"valid": {"accuracy": 1}}}}', "no finite test accuracy"),
    ],
)
def test_a_result_that_is_not_finite_and_complete_is_not_done(tmp_path, result, problem):
    run = RunStore(tmp_path).run("r")
    run.write_config({})
    run.set_status(S.DONE)
    run.result_path.write_text(result)
    assert not run.is_done() and run.effective_state() is S.CORRUPT
    assert problem in run.fault()


def test_only_run_directories_are_runs(tmp_path):
    store = RunStore(tmp_path)
    store.run("a").write_config({})
    b = store.run("b")
    b.path.mkdir()
    b.status_path.write_text('{"state": "done"}')  # config.json deleted: shown, as corrupt
    (tmp_path / ".submitit").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".lock").touch()  # a claim that wrote nothing yet
    assert [r.run_id for r in store.runs()] == ["a", "b"]
    assert b.effective_state() is S.CORRUPT and "config.json is missing" in b.fault()


def test_bench_status_shows_reasons_and_corrupt_runs(tmp_path, capsys):
    store = RunStore(tmp_path)
    diverged = store.run("cmnist_vanilla_r1_s0_0000000000")
    diverged.write_config({"method": "vanilla"})
    diverged.set_status(S.RUNNING, attempt=1)
    diverged.set_status(
        S.FAILED, reason=FailReason.DIVERGED, error="train loss is nan at step 120", step=120
    )
    legacy = store.run("cmnist_vanilla_r1_s1_0000000000")
    legacy.write_config({"method": "vanilla"})
    legacy.set_status(S.FAILED, error="timed out after 5 s (killed)")
    legacy.status_path.write_text(
        json.dumps({k: v for k, v in legacy.status().items() if k != "reason"})
    )
    torn = store.run("cmnist_vanilla_r1_s2_0000000000")
    torn.write_config({"method": "vanilla"})
    torn.status_path.write_text('{"state": "ru')
    pending = store.run("cmnist_vanilla_r1_s3_0000000000")
    pending.write_config({"method": "vanilla"})
    pending.set_status(S.PENDING)

    assert main(["status", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| failed  |" in out and "diverged: train loss is nan at step 120" in out
    assert "timed out: timed out after 5 s" in out
    row = next(line for line in out.splitlines() if line.startswith(f"| {torn.run_id}"))
    assert "| corrupt" in row and "status.json is not valid JSON" in row
    assert f"mv {torn.status_path} {torn.status_path}.bad" in out
    assert "1 corrupt" in out and "2 failed" in out

    assert main(["status", "--out", str(tmp_path), "--failed"]) == 0
    out = capsys.readouterr().out
    assert f"{diverged.run_id}  failed (diverged)  attempt 1" in out
    assert "error: train loss is nan at step 120" in out
    assert f"{legacy.run_id}  failed (timed out)" in out
    assert f"{torn.run_id}  corrupt" in out and "hint: move it aside" in out
    assert pending.run_id not in out
