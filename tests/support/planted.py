"""Runs planted in a store through its owner (``RunDir``), for tests of the readers: the
config is a real one (its run id is the folder's name), results and states are recorded the
way a sweep records them."""

from __future__ import annotations

from typing import Any

from debias_bench.config.run_config import make_config
from debias_bench.runs.provenance import config_json
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore


def plant(
    store: RunStore,
    method: str = "vanilla",
    dataset: str = "toy",
    ratio: float = 5.0,
    seed: int = 0,
    **make: Any,
) -> RunDir:
    """A planned (``pending``) run of that configuration; ``make``: more ``make_config``
    arguments (``protocol``, ``preset``, ``overrides``)."""
    config = make_config(method, dataset, ratio, seed, **make)
    run = store.run(config.run_id)
    run.plan(config_json(config))
    return run


def selections(accuracy: float = 50.0, conflicting: float = 40.0) -> dict[str, Any]:
    """A complete ``selections`` block: every selection at the same evaluation."""
    split = {"accuracy": accuracy, "aligned_accuracy": 90.0, "conflicting_accuracy": conflicting}
    chosen = {"step": 10, "epoch": 1.0, "valid": dict(split), "test": dict(split)}
    return {name: dict(chosen) for name in ("last", "best_valid", "best_test")}


def finish(run: RunDir, **result: Any) -> RunDir:
    """Record ``run`` as done with a complete result (``result`` overrides its fields)."""
    config = run.config()
    run.transition(RunState.RUNNING, attempt=1)
    run.write_result(
        {
            "method": config["method"],
            "dataset": config["dataset"],
            "ratio": config["ratio"],
            "seed": config["seed"],
            "protocol": config["protocol"],
            "preset": config["preset"],
            "selections": selections(),
            "train_time_s": 1.0,
            **result,
        }
    )
    run.transition(RunState.DONE, exit_code=0)
    return run


def finish_running(run: RunDir) -> RunDir:
    """Record a ``running`` run as done with a complete result."""
    config = run.config()
    run.write_result({"method": config["method"], "selections": selections()})
    run.transition(RunState.DONE, exit_code=0)
    return run
