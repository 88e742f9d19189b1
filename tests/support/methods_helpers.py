"""Small helpers for method tests (imported as a module from tests/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from debias_bench.config.run_config import RunConfig, make_config
from debias_bench.data.contract import Batch
from debias_bench.data.spec import DatasetSpec
from debias_bench.errors import Interrupted
from debias_bench.paths import DataPlace
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run
from support.asserts import assert_close_nested

CPU = torch.device("cpu")


def toy_batch(spec: DatasetSpec, n: int = 16, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    h, w = spec.image_size
    return Batch(
        index=torch.arange(n),
        x=torch.rand(n, spec.channels, h, w, generator=g),
        y=torch.randint(0, spec.num_classes, (n,), generator=g),
        b=torch.randint(0, spec.num_biases, (n,), generator=g),
    )


def whole_and_stopped(
    config: RunConfig, tmp_path: Path, place: DataPlace, *, stop_at: int
) -> tuple[dict[str, Any], RunDir, RunDir]:
    """``config`` trained to the end (under ``tmp_path/whole``) and stopped at step ``stop_at``
    (under ``tmp_path/split``): the whole run's result, its folder and the stopped run's."""
    whole_dir = RunStore(tmp_path / "whole").run(config.run_id)
    whole = train_run(config, whole_dir, place, CPU)
    stopped = RunStore(tmp_path / "split").run(config.run_id)
    with pytest.raises(Interrupted):
        train_run(config, stopped, place, CPU, should_stop=lambda step: step == stop_at)
    return whole, whole_dir, stopped


def assert_resumes_to_whole(
    config: RunConfig, place: DataPlace, stopped: RunDir, whole: dict[str, Any], whole_dir: RunDir
) -> None:
    """The stopped run, resumed from its checkpoint, ends exactly where the whole run did: the
    same selections and the same metrics at every evaluation."""
    resumed = train_run(config, stopped, place, CPU)
    assert_close_nested(resumed["selections"], whole["selections"])
    for a, b in zip(stopped.metrics(), whole_dir.metrics(), strict=True):
        assert_close_nested(
            {k: a[k] for k in ("valid", "test", "train")},
            {k: b[k] for k in ("valid", "test", "train")},
        )


def real_cmnist_run(
    method: str,
    tmp_path: Path,
    place: DataPlace,
    *,
    epochs: int,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``method`` trained on real Colored MNIST at 1 % bias-conflicting samples, seed 0, clean
    protocol, ``epochs`` of the quick preset, on the CPU: its result."""
    config = make_config(
        method, "cmnist", 1.0, 0, protocol="clean", preset="quick", epochs=epochs,
        overrides=overrides,
    )  # fmt: skip
    return train_run(config, RunStore(tmp_path).run(config.run_id), place, CPU)
