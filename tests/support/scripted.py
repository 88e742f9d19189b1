"""The launcher tests' dataset (``scripted``): Vanilla's runs on a tiny in-memory dataset
whose training images misbehave on cue, by the run's ratio (see :class:`ScriptedImages`).
Worker processes import this module to find the dataset (``BENCH_PLUGINS=support.scripted``).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path

import numpy as np

from debias_bench.data.contract import Split, Splits
from debias_bench.registry import DATASETS
from debias_bench.runs.store import RunStore
from support.toy import ToyFamily, make_toy_split

#: ratio -> what the run does at its 5th training batch (slow: sleeps before every batch)
BEHAVIOURS = {1.0: "ok", 2.0: "fail", 3.0: "hang", 4.0: "sigkill", 5.0: "flaky", 6.0: "slow"}
TRIGGER_BATCH = 5


class ScriptedImages:
    """Training images that misbehave on cue (the engine reads them through ``take``)."""

    def __init__(self, images: np.ndarray, behaviour: str, marker: Path) -> None:
        self.images, self.behaviour, self.marker = images, behaviour, marker
        self.reads = 0

    def __len__(self) -> int:
        return len(self.images)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The whole array at once, unscripted: the data fingerprint hashes it before a run
        (row by row through ``__getitem__`` it would sleep 256 times)."""
        return np.asarray(self.images, dtype=dtype)

    def __getitem__(self, rows):
        self.reads += 1
        if self.behaviour == "slow":
            time.sleep(float(os.environ.get("SCRIPTED_DELAY_S", "0.05")))
        elif self.reads == TRIGGER_BATCH:
            self._misbehave()
        return self.images[rows]

    def _misbehave(self) -> None:
        if self.behaviour == "fail":
            raise RuntimeError("scripted failure")
        if self.behaviour == "hang":
            while True:  # ignores SIGTERM: only SIGKILL ends it
                time.sleep(1)
        if self.behaviour == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.behaviour == "flaky" and not self.marker.exists():
            self.marker.parent.mkdir(parents=True, exist_ok=True)
            self.marker.touch()
            raise RuntimeError("scripted failure, first attempt only")


class ScriptedFamily(ToyFamily):
    """The toy dataset, smaller, with a ratio per behaviour: its training images misbehave."""

    spec = dataclasses.replace(ToyFamily.spec, name="scripted", ratios=tuple(BEHAVIOURS))

    def load(self, ratio: float) -> Splits:
        ratio = self.check_ratio(ratio)
        train = make_toy_split(256, 0.05, 1, "train")
        marker = self.data_root / f"flaky-{ratio:g}"
        images = ScriptedImages(train.images.numpy(), BEHAVIOURS[ratio], marker)
        return Splits(
            train=Split(images, train.labels, train.biases, name="train"),
            valid=make_toy_split(64, 0.75, 2, "valid"),
            test=make_toy_split(64, 0.75, 3, "test"),
        )


if "scripted" not in DATASETS:
    DATASETS.register("scripted", display_name="Scripted", citation="test fixture")(ScriptedFamily)


# ------------------------------------------------------------------------------ helpers
def bench_args(out: Path, ratios: str, seeds: str = "0", steps: int = 40) -> list[str]:
    return [
        "--methods",
        "vanilla",
        "--datasets",
        "scripted",
        "--ratios",
        ratios,
        "--seeds",
        seeds,
        "--protocol",
        "clean",
        "--set",
        f"steps={steps}",
        "--set",
        "eval_every=10",
        "--set",
        "batch_size=32",
        "--out",
        str(out),
        "--device",
        "cpu",
    ]


def statuses(out: Path) -> dict[float, dict]:
    """ratio -> status.json of each run (seed 0) in the store."""
    found = {}
    for run_dir in RunStore(out).runs():
        config = run_dir.config()
        if config["seed"] == 0:
            found[config["ratio"]] = run_dir.status()
    return found


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
