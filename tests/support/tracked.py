"""What the trackers recorded, read back from a real MLflow store (SQLite) and real
TensorBoard event files (the tracking and Slurm tests; needs the ``track`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from debias_bench.runs.run_dir import RunDir


def mlflow_runs(db: Path, out: Path) -> dict[str, object]:
    """run id of the store -> its MLflow run, in the sweep's experiment (named after --out)."""
    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name(str(out.resolve()))
    assert experiment is not None, "no experiment named after --out"
    found = client.search_runs([experiment.experiment_id])
    by_id = {r.data.tags["run_id"]: r for r in found}
    assert len(by_id) == len(found), "a run of the store was tracked twice"
    return by_id


def history(db: Path, mlflow_id: str, key: str) -> list[tuple[int, float]]:
    metrics = MlflowClient(f"sqlite:///{db}").get_metric_history(mlflow_id, key)
    return sorted((m.step, m.value) for m in metrics)


def tb_scalars(logdir: Path, key: str) -> list[tuple[int, float]]:
    events = EventAccumulator(str(logdir)).Reload()
    return sorted((e.step, e.value) for e in events.Scalars(key))


def same_curve(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    """The same steps, and values equal to float32 precision (TensorBoard stores float32)."""
    steps_match = [s for s, _ in got] == [s for s, _ in want]
    return steps_match and [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6)


def store_losses(run_dir: RunDir) -> list[tuple[int, float]]:
    return [(int(r["step"]), r["train"]["loss"]) for r in run_dir.metrics()]
