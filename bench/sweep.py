"""Expanding a grid into runs and executing them, skipping what is already done.

Runs execute in this process, one after another. Each run's outcome (done, skipped with the
method's reason, failed with the error, interrupted) is recorded in its own ``status.json``;
a failing run does not stop the sweep unless ``fail_fast``.
"""

from __future__ import annotations

import subprocess
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from debias_bench import __version__
from debias_bench.config import RunConfig, make_config
from debias_bench.engine import DataPlace, Interrupted, Progress, train_run
from debias_bench.errors import BenchError, ConfigError
from debias_bench.registry import DATASETS, METHODS
from debias_bench.store import RunDir, RunStore


@dataclass
class Grid:
    methods: list[str]
    datasets: list[str]
    ratios: list[float] | None  # None: every ratio each dataset supports
    seeds: list[int]
    protocol: str = "official"
    preset: str = "paper"
    epochs: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    data_options: dict[str, Any] = field(default_factory=dict)


def expand(grid: Grid) -> tuple[list[RunConfig], list[str]]:
    """Configs of the grid, and notes on combinations left out (unsupported ratios)."""
    configs, notes = [], []
    for dataset in grid.datasets:
        supported = DATASETS.get(dataset).spec.ratios
        ratios = supported if grid.ratios is None else [r for r in grid.ratios if r in supported]
        dropped = [r for r in (grid.ratios or []) if r not in supported]
        if dropped:
            notes.append(
                f"{dataset}: no ratio {', '.join(f'{r:g}' for r in dropped)}% "
                f"(has {', '.join(f'{r:g}' for r in supported)}); left out"
            )
        for ratio in ratios:
            for method in grid.methods:
                for seed in grid.seeds:
                    configs.append(
                        make_config(
                            method,
                            dataset,
                            ratio,
                            seed,
                            grid.protocol,
                            grid.preset,
                            grid.epochs,
                            grid.overrides,
                            grid.data_options,
                        )
                    )
    if not configs:
        raise ConfigError("the grid is empty", hint="; ".join(notes) or None)
    return configs, notes


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance() -> dict[str, Any]:
    return {"code_version": __version__, "git_commit": _git_commit(), "torch": torch.__version__}


@dataclass
class Outcome:
    config: RunConfig
    run_dir: RunDir
    state: str  # done | skipped | failed | interrupted | running
    note: str = ""
    result: dict[str, Any] | None = None
    ran: bool = False


def run_one(
    config: RunConfig,
    store: RunStore,
    place: DataPlace,
    device: torch.device,
    progress: Progress | None = None,
    retry_failed: bool = False,
    should_stop: Callable[[int], bool] = lambda step: False,
) -> Outcome:
    run_dir = store.run(config.run_id)
    if run_dir.is_done():
        return Outcome(config, run_dir, "done", "already done", run_dir.result())
    state = run_dir.effective_state()
    if state == "running":
        return Outcome(config, run_dir, "running", "running in another process")
    if state == "failed" and not retry_failed:
        return Outcome(config, run_dir, "failed", "failed before; pass --retry-failed to rerun")
    method_cls = METHODS.get(config.method)
    reason = method_cls.skip(DATASETS.get(config.dataset).spec, config.hparams)
    run_dir.write_config({**config.to_json(), "run_id": config.run_id, "provenance": provenance()})
    if reason:
        run_dir.set_status("skipped", reason=reason)
        return Outcome(config, run_dir, "skipped", reason)
    attempt = int(run_dir.status().get("attempt", 0)) + 1
    run_dir.set_status("running", attempt=attempt, device=str(device), error=None, exit_code=None)
    try:
        result = train_run(config, run_dir, place, device, progress, should_stop)
    except Interrupted as exc:
        run_dir.set_status("interrupted", note=str(exc))
        raise
    except KeyboardInterrupt:
        run_dir.set_status("interrupted", note="keyboard interrupt; rerun to resume")
        raise
    except Exception as exc:
        message = str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
        tail = "".join(traceback.format_exception(exc)[-6:])
        run_dir.set_status("failed", error=message, traceback_tail=tail, exit_code=1)
        return Outcome(config, run_dir, "failed", message, ran=True)
    run_dir.set_status("done", exit_code=0)
    return Outcome(config, run_dir, "done", "", result, ran=True)
