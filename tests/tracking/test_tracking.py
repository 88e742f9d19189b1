"""Experiment tracking end to end with the real libraries: MLflow (a SQLite store read back
through ``MlflowClient``), TensorBoard (event files read back with ``EventAccumulator``) and
W&B (an offline run folder), from the inline and local launchers, across a resume, and
backfilled from a run store (``bench track export``). The runs are real, on the tiny
scripted dataset of ``support.scripted``: ratio 1 trains, ratio 2 fails at its 5th batch,
ratio 6 is slow enough to be stopped midway."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import bench_env
from support.scripted import _wait_for, bench_args

from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.tracking import TRACKERS, TrackedRun, Tracker

mlflow = pytest.importorskip("mlflow", reason="MLflow is not installed: pip install -e '.[track]'")
pytest.importorskip("tensorboard", reason="TensorBoard is not installed: pip install -e '.[track]'")
from mlflow.tracking import MlflowClient  # noqa: E402
from support.tracked import (  # noqa: E402
    history,
    mlflow_runs,
    same_curve,
    store_losses,
    tb_scalars,
)

STEPS = [10, 20, 30, 40]  # bench_args: 40 steps, an evaluation every 10


def by_ratio(out: Path) -> dict[float, RunDir]:
    return {d.config()["ratio"]: d for d in RunStore(out).runs()}


def test_local_sweep_sends_every_run_to_mlflow_and_tensorboard(tmp_path, in_process):
    out, db, logdir = tmp_path / "runs", tmp_path / "ml" / "mlflow.db", tmp_path / "tb"
    code, _, err = in_process(
        "run",
        *bench_args(out, "1,2", seeds="0,1"),
        *("--launcher", "local", "--workers", "2"),
        *("--track", f"mlflow=sqlite:///{db}", "--track", f"tensorboard={logdir}"),
    )
    assert code == 1, err  # the ratio-2 runs fail on purpose
    runs = {d.run_id: d for d in RunStore(out).runs()}
    tracked = mlflow_runs(db, out)
    assert set(tracked) == set(runs)
    for run_id, run_dir in runs.items():
        mlrun = tracked[run_id]
        config = run_dir.config()
        assert mlrun.data.params["lr"] == json.dumps(config["hparams"]["lr"])
        assert mlrun.data.params["batch_size"] == str(config["hparams"]["batch_size"])
        tags = mlrun.data.tags
        assert (tags["method"], tags["dataset"]) == ("vanilla", "scripted")
        assert float(tags["ratio"]) == config["ratio"] and int(tags["seed"]) == config["seed"]
        assert tags["state"] == run_dir.status()["state"]
        if config["ratio"] == 1.0:
            assert mlrun.info.status == "FINISHED" and tags["state"] == "done"
            losses = store_losses(run_dir)
            assert [s for s, _ in losses] == STEPS
            assert same_curve(history(db, mlrun.info.run_id, "train/loss"), losses)
            valid = history(db, mlrun.info.run_id, "valid/accuracy")
            assert [s for s, _ in valid] == STEPS
            assert same_curve(tb_scalars(logdir / run_id, "train/loss"), losses)
            assert [s for s, _ in tb_scalars(logdir / run_id, "test/conflicting_accuracy")] == STEPS
            artifacts = MlflowClient(f"sqlite:///{db}").list_artifacts(mlrun.info.run_id)
            assert {a.path for a in artifacts} == {"config.json", "result.json"}
        else:
            assert mlrun.info.status == "FAILED" and tags["state"] == "failed"
            assert "scripted failure" in tags["reason"]
            assert history(db, mlrun.info.run_id, "train/loss") == []  # failed before step 10
        cursors = run_dir.tracking()
        assert cursors[f"mlflow=sqlite:///{db}"]["id"] == mlrun.info.run_id
        # what tracking cost the run is recorded (bench perf --track-overhead reads it)
        assert 0 < cursors[f"mlflow=sqlite:///{db}"]["spent_s"] < 60


@pytest.mark.slow
def test_a_resumed_run_continues_its_tracked_run_without_repeating_a_step(tmp_path, in_process):
    """Stop a local sweep midway (SIGTERM), then run it again: one MLflow run, KILLED while
    stopped and FINISHED after; every evaluation once, in MLflow and in TensorBoard."""
    out, db, logdir = tmp_path / "runs", tmp_path / "mlflow.db", tmp_path / "tb"
    track = ["--track", f"mlflow={db}", "--track", f"tensorboard={logdir}"]
    args = [*bench_args(out, "6", steps=60), "--launcher", "local", *track]
    sweep = subprocess.Popen(
        [sys.executable, "-m", "debias_bench.cli", "run", *args],
        env=bench_env(tmp_path, SCRIPTED_DELAY_S="0.1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: any(len(d.metrics()) >= 2 for d in RunStore(out).runs()), 300, "midway")
    finally:
        sweep.send_signal(signal.SIGTERM)
        sweep.wait(timeout=120)
    (run_dir,) = RunStore(out).runs()
    assert run_dir.effective_state() is RunState.INTERRUPTED
    (stopped,) = mlflow_runs(db, out).values()
    assert stopped.info.status == "KILLED"
    seen = [s for s, _ in history(db, stopped.info.run_id, "train/loss")]
    assert seen and seen == sorted(set(seen))

    code, _, err = in_process("run", *args)  # SCRIPTED_DELAY_S unset: the default 0.05 s
    assert code == 0, err
    (finished,) = mlflow_runs(db, out).values()
    assert finished.info.run_id == stopped.info.run_id and finished.info.status == "FINISHED"
    losses = store_losses(run_dir)
    assert [s for s, _ in losses] == [10, 20, 30, 40, 50, 60]
    assert same_curve(history(db, finished.info.run_id, "train/loss"), losses)
    assert same_curve(tb_scalars(logdir / run_dir.run_id, "train/loss"), losses)


def test_export_backfills_a_store_once(tmp_path, in_process):
    """A store trained without --track, sent afterwards; a second export sends nothing."""
    out, db, logdir = tmp_path / "runs", tmp_path / "mlflow.db", tmp_path / "tb"
    code, _, err = in_process("run", *bench_args(out, "1,2"))
    assert code == 1, err
    targets = ["--to", f"mlflow=sqlite:///{db}", "--to", f"tensorboard={logdir}"]
    code, _, err = in_process("track", "export", "--out", str(out), *targets)
    assert code == 0, err
    assert "2 runs sent (4 evaluations), 0 already up to date, 0 left out" in err
    tracked = mlflow_runs(db, out)
    runs = by_ratio(out)
    done, failed = tracked[runs[1.0].run_id], tracked[runs[2.0].run_id]
    assert done.info.status == "FINISHED" and failed.info.status == "FAILED"
    assert same_curve(history(db, done.info.run_id, "train/loss"), store_losses(runs[1.0]))

    code, _, err = in_process("track", "export", "--out", str(out), *targets)
    assert code == 0, err
    assert "0 runs sent (0 evaluations), 2 already up to date" in err
    again = mlflow_runs(db, out)
    assert {k: v.info.run_id for k, v in again.items()} == {
        k: v.info.run_id for k, v in tracked.items()
    }
    assert len(history(db, done.info.run_id, "train/loss")) == len(STEPS)
    assert [s for s, _ in tb_scalars(logdir / runs[1.0].run_id, "train/loss")] == STEPS


def test_a_missing_tracker_library_is_exit_2_with_the_install_command(
    tmp_path, in_process, monkeypatch
):
    out = tmp_path / "runs"
    monkeypatch.setattr(TRACKERS.get("mlflow"), "modules", ("mlflow_is_not_installed_here",))
    code, _, err = in_process("run", *bench_args(out, "1"), "--track", "mlflow")
    assert code == 2 and "Traceback" not in err
    assert "mlflow_is_not_installed_here is not installed" in err
    assert 'pip install -e ".[track]"' in err
    assert not out.exists()  # refused before anything was created
    code, _, err = in_process("run", *bench_args(out, "1"), "--track", "comet")
    assert code == 2 and "unknown tracker 'comet'" in err and "mlflow, tensorboard" in err


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("::not a uri::", "neither a tracking URI (SCHEME://...) nor the path of a SQLite file"),
        ("mlruns", "neither a tracking URI"),
        ("http:/localhost:5000", "neither a tracking URI"),
        ("htp://localhost:5000", "MLflow has no tracking store for the scheme 'htp'"),
        ("http://", "http:// must be followed by a host"),
        ("sqlite:///", "sqlite:/// must be followed by a database file"),
        ("sqlite://", "sqlite:/// must be followed by a database file"),
    ],
)
def test_a_bad_mlflow_target_is_refused_before_anything_is_written(
    tmp_path, in_process, monkeypatch, target, problem
):
    """A target MLflow cannot take was a SQLite file named like it in the working directory,
    and the sweep went on (exit 0): now one line naming the value and the forms it takes."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    out = tmp_path / "runs"
    code, _, err = in_process("run", *bench_args(out, "1"), "--track", f"mlflow={target}")
    assert code == 2, err
    line = err.strip().splitlines()[-1]  # one line (after the sweep's notes), no traceback
    assert "Traceback" not in err and err.count("error:") == 1
    assert line.startswith(f"error: --track 'mlflow={target}': ") and problem in line
    assert "mlflow=PATH.db" in line and "mlflow=http(s)://HOST[:PORT]" in line
    assert not out.exists() and list(work.iterdir()) == []  # nothing created, anywhere
    code, _, err = in_process("track", "export", "--out", str(out), "--to", f"mlflow={target}")
    assert code == 2 and "Traceback" not in err


def test_a_bad_wandb_project_is_refused_before_anything_is_written(tmp_path, in_process):
    pytest.importorskip("wandb", reason="W&B is not installed: pip install -e '.[wandb]'")
    out = tmp_path / "runs"
    code, _, err = in_process("run", *bench_args(out, "1"), "--track", "wandb=team/project")
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and err.count("error:") == 1
    assert "--track 'wandb=team/project': a W&B project name holds none of" in line
    assert "(found /)" in line and "wandb=PROJECT" in line
    assert not out.exists()


class _Failing(TrackedRun):
    id = "broken"

    def log(self, step: int, metrics: dict[str, float]) -> None:
        raise ConnectionError("tracking server went away")

    def finish(self, state: RunState, reason: str, files: list[Path]) -> None:
        raise AssertionError("a failed tracker is left out for the rest of the run")


class _FailingTracker(Tracker):
    kind, extra, modules = "failing", "track", ()

    @classmethod
    def resolve(cls, target: str, out: Path) -> str:
        return target or "nowhere"

    def start(self, run_id, resume, params, tags) -> TrackedRun:
        return _Failing()


@pytest.fixture
def failing_tracker():
    TRACKERS.register("failing", display_name="fails on every log (test)")(_FailingTracker)
    yield
    TRACKERS.unregister("failing")


def test_a_tracker_that_fails_mid_run_is_a_warning_and_the_run_finishes(
    tmp_path, in_process, failing_tracker
):
    out, db = tmp_path / "runs", tmp_path / "mlflow.db"
    track = ["--track", "failing", "--track", f"mlflow={db}"]
    code, _, err = in_process("run", *bench_args(out, "1"), *track)
    assert code == 0, err
    assert err.count("warning: tracking") == 1 and "tracking server went away" in err
    (run_dir,) = RunStore(out).runs()
    assert run_dir.is_done()
    (mlrun,) = mlflow_runs(db, out).values()  # the other tracker got everything
    assert mlrun.info.status == "FINISHED"
    assert [s for s, _ in history(db, mlrun.info.run_id, "train/loss")] == STEPS


def wandb_records(path: Path) -> list[object]:
    """The protobuf records of a W&B run file (``run-<id>.wandb``): a 7-byte header, then
    LevelDB-log records in 32 KiB blocks (checksum, little-endian length, type: 1 full,
    2 first, 3 middle, 4 last)."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, pos, block = path.read_bytes(), 7, 32768
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    records, pending = [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def test_wandb_offline_run_folder(tmp_path, in_process, monkeypatch):
    """No credentials and WANDB_MODE=offline: an offline run folder in --out that holds the
    run's history (every evaluation at its step), final state, config and result."""
    pytest.importorskip("wandb", reason="W&B is not installed: pip install -e '.[wandb]'")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "runs"
    code, _, err = in_process("run", *bench_args(out, "1"), "--track", "wandb=bench-test")
    # no tracker failed (a busy machine may add the launcher's oversubscription warning)
    assert code == 0 and "warning: tracking" not in err, err
    (run_dir,) = RunStore(out).runs()
    wandb_id = run_dir.tracking()["wandb=bench-test"]["id"]
    (folder,) = (out / "wandb").glob(f"offline-run-*-{wandb_id}")
    assert {"config.json", "result.json"} <= {p.name for p in (folder / "files").iterdir()}
    records = wandb_records(folder / f"run-{wandb_id}.wandb")
    curve = []
    for record in records:
        if record.WhichOneof("record_type") == "history":
            items = {
                i.key or "/".join(i.nested_key): json.loads(i.value_json)
                for i in record.history.item
            }
            curve.append((items["_step"], items["train/loss"]))
    assert same_curve(sorted(curve), store_losses(run_dir))
    summary = {
        i.key: json.loads(i.value_json)
        for r in records
        if r.WhichOneof("record_type") == "summary"
        for i in r.summary.update
    }
    assert summary["state"] == "done"
    exits = [r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"]
    assert exits == [0]


def test_track_cost_is_the_median_paired_throughput_ratio():
    """bench perf --track-overhead: one minus the median of tracked/untracked steps/s."""
    from debias_bench.perf.tracking_cost import TrackCost

    cost = TrackCost("mlflow", plain=[100.0, 50.0, 80.0], tracked=[99.0, 40.0, 79.2])
    cost.inside = [(0.2, 10.0), (0.3, 12.0), (0.1, 9.0)]
    assert cost.cost == pytest.approx(0.01)  # ratios 0.99, 0.8, 0.99: the median is 0.99
    assert "cost +1.00 %" in cost.line() and "0.20 s of a 10.0 s run (2.00 %)" in cost.line()


def test_an_unknown_tracker_names_the_valid_ones_and_bench_list_shows_them(in_process):
    code, _, err = in_process("perf", "--track-overhead", "nope", "--runs", "1")
    assert code == 2 and "valid names: mlflow, tensorboard, wandb" in err
    assert "bench list trackers" in err
    code, out, _ = in_process("list", "trackers")
    assert code == 0 and 'pip install -e ".[track]"' in out and "wandb" in out
