"""Run states in one module: the state a run's files mean, what a sweep does with it, the
failure reasons recorded in status.json, and how ``bench status`` shows them."""

from __future__ import annotations

import errno
import json

import pytest
from support.planted import finish, finish_running, plant

from debias_bench.cli import main
from debias_bench.errors import CorruptDataError, FailReason, RunFailure
from debias_bench.runs.jsonio import write_atomic
from debias_bench.runs.states import (
    STALE_AFTER_S,
    SUCCESS,
    Facts,
    IllegalTransition,
    RunState,
    classify,
    decide,
    effective_state,
    failure_reason,
)
from debias_bench.runs.store import RunStore

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
        "pending", "running", "done", "failed", "interrupted", "dead", "corrupt", "skipped",
        "stale",
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
    import debias_bench.runs.jsonio as store

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "fsync", full)
    with pytest.raises(OSError) as info:
        write_atomic(tmp_path / "status.json", "{}")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "status.json")
    assert list(tmp_path.iterdir()) == []


def test_transition_records_a_declared_reason(tmp_path):
    run = plant(RunStore(tmp_path))
    run.transition(S.RUNNING, attempt=1)
    run.transition(S.FAILED, reason=FailReason.DIVERGED, error="loss is inf at step 8", step=8)
    status = json.loads(run.status_path.read_text())
    assert (status["state"], status["reason"], status["step"]) == ("failed", "diverged", 8)
    run.transition(S.FAILED, submitted_job_id="12")  # the reason is kept
    assert run.status()["reason"] == "diverged"
    run.transition(S.RUNNING)  # and dropped when the run starts again
    assert "reason" not in run.status()
    with pytest.raises(ValueError):
        run.transition(S.FAILED, reason="out of luck")  # not a declared reason
    assert failure_reason({"state": "failed", "error": "timed out after 5 s (killed)"}) == (
        FailReason.TIMED_OUT
    )  # a status written before reasons were recorded
    assert failure_reason({"state": "failed", "error": "boom"}) is FailReason.CRASHED


@pytest.mark.parametrize(
    "stored,target",
    [
        (S.PENDING, S.DONE),  # done needs a verified result
        (S.PENDING, S.DEAD),  # only a running run dies
        (S.PENDING, S.INTERRUPTED),
        (S.FAILED, S.DEAD),
        (S.SKIPPED, S.FAILED),
        (S.PENDING, S.CORRUPT),  # found by readers, never recorded
    ],
)
def test_illegal_transitions_are_refused(tmp_path, stored, target):
    run = plant(RunStore(tmp_path))
    if stored is not S.PENDING:
        run.transition(S.RUNNING)
        run.transition(stored)
    before = run.status_path.read_bytes()
    with pytest.raises(IllegalTransition):
        run.transition(target)
    assert run.status_path.read_bytes() == before


def test_a_run_that_ends_while_it_is_read_is_done_not_dead(tmp_path, monkeypatch):
    """Its owner writes the result, records done and lets go of the lock between the read of
    its status (running) and the read of its lock (free): a sweep waiting for it said
    "released (dead)" under load and trained it again."""
    run = plant(RunStore(tmp_path))
    run.transition(S.RUNNING, attempt=1)

    def ends_now() -> bool:
        finish_running(run)
        return False

    monkeypatch.setattr(run, "lock_held", ends_now)
    assert run.effective_state() is S.DONE


def test_a_done_run_never_changes_state(tmp_path):
    run = finish(plant(RunStore(tmp_path)))
    for target in (S.RUNNING, S.FAILED, S.PENDING, S.DEAD):
        with pytest.raises(IllegalTransition):
            run.transition(target)
    assert run.effective_state() is S.DONE


@pytest.mark.parametrize(
    "text,problem",
    [
        ("", "not valid JSON"),
        ('{"state": "runn', "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"state": "exploded"}', "unknown state"),
        ('{"state": "corrupt"}', "unknown state"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_unreadable_status_is_corrupt_with_the_fix(tmp_path, text, problem):
    run = plant(RunStore(tmp_path))
    if isinstance(text, bytes):
        run.status_path.write_bytes(text)
    else:
        run.status_path.write_text(text)
    assert run.effective_state() is S.CORRUPT
    assert problem in run.fault() and f"mv {run.status_path} {run.status_path}.bad" in run.fault()
    with pytest.raises(CorruptDataError):
        run.status()


@pytest.mark.parametrize(
    "edit,problem",
    [
        (lambda r: {**r, "selections": {"last": {"valid": {"accuracy": "NaN"}}}}, "holds NaN"),
        (lambda r: {**r, "selections": {}}, "has no selections"),
        (lambda r: {**r, "selections": {"last": r["selections"]["last"]}}, "has no best_valid"),
        (
            lambda r: {**r, "selections": {**r["selections"], "last": {"valid": {"accuracy": 1}}}},
            "no finite test accuracy",
        ),
        (lambda r: {**r, "run_id": "toy_vanilla_r5_s1_0123456789"}, "belongs to run"),
        (lambda r: {**r, "config_digest": "0" * 64}, "another configuration"),
    ],
)
def test_a_result_that_is_not_finite_complete_and_its_own_is_not_done(tmp_path, edit, problem):
    run = finish(plant(RunStore(tmp_path)))
    result = json.loads(run.result_path.read_text())
    text = json.dumps(edit(result)).replace('"NaN"', "NaN")
    run.result_path.write_text(text)
    assert not run.is_done() and run.effective_state() is S.CORRUPT
    assert problem in run.fault()


def test_a_result_written_before_results_carried_a_digest_is_checked_by_its_run_id(tmp_path):
    run = finish(plant(RunStore(tmp_path)))
    result = json.loads(run.result_path.read_text())
    del result["config_digest"]
    run.result_path.write_text(json.dumps(result))
    assert run.effective_state() is S.DONE


def test_only_run_directories_are_runs(tmp_path):
    store = RunStore(tmp_path)
    a = plant(store)
    b = store.run("b")
    b.path.mkdir()
    b.status_path.write_text('{"state": "done"}')  # config.json deleted: shown, as corrupt
    (tmp_path / ".submitit").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".lock").touch()  # a claim that wrote nothing yet
    assert [r.run_id for r in store.runs()] == sorted([a.run_id, "b"])
    assert b.effective_state() is S.CORRUPT and "config.json is missing" in b.fault()


def test_bench_status_shows_reasons_and_corrupt_runs(tmp_path, capsys):
    store = RunStore(tmp_path)
    diverged = plant(store, seed=0)
    diverged.transition(S.RUNNING, attempt=1)
    diverged.transition(
        S.FAILED, reason=FailReason.DIVERGED, error="train loss is nan at step 120", step=120
    )
    legacy = plant(store, seed=1)
    legacy.transition(S.FAILED, error="timed out after 5 s (killed)")
    legacy.status_path.write_text(
        json.dumps({k: v for k, v in legacy.status().items() if k != "reason"})
    )
    torn = plant(store, seed=2)
    torn.status_path.write_text('{"state": "ru')
    pending = plant(store, seed=3)

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
