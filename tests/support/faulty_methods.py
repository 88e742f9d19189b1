"""Plugin methods that misbehave on cue, for the fault-injection tests.

``faulty`` (``--set fault=...``): Vanilla whose ``predict`` returns a wrong shape or non-finite
logits, or whose ``update`` at its 5th step calls ``sys.exit(3)``, raises ``KeyboardInterrupt``,
calls ``os._exit(0)`` (the process ends at once: no exception, no ``atexit``, exit code 0) or
sleeps for ever (signals to its process are the only way out).
:class:`HiddenState` (not registered here; a test registers it): Vanilla that keeps a tensor
where a checkpoint would not save it (inside a list, or inside an object without
``state_dict``)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from debias_bench.config.hparams import EngineParams, hparam
from debias_bench.data.contract import Batch
from debias_bench.data.spec import DatasetSpec
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import METHODS, register_method
from debias_bench.training.method import TrainEnv

FAULTS = ("none", "shape", "nonfinite", "exit", "interrupt", "os_exit", "sleep")


@dataclass(frozen=True)
class FaultyParams(EngineParams):
    fault: str = hparam("none", "what goes wrong", choices=FAULTS)


class Faulty(Vanilla):
    Params = FaultyParams
    hp: FaultyParams

    def __init__(self, spec: DatasetSpec, hp: Mapping[str, Any], env: TrainEnv) -> None:
        super().__init__(spec, hp, env)
        self.steps = 0

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.steps += 1
        if self.steps == 5 and self.hp.fault == "exit":
            sys.exit(3)
        if self.steps == 5 and self.hp.fault == "interrupt":
            raise KeyboardInterrupt
        if self.steps == 5 and self.hp.fault == "os_exit":
            os._exit(0)
        if self.steps == 5 and self.hp.fault == "sleep":
            print(f"faulty: sleeping for ever in update (pid {os.getpid()})", file=sys.stderr)
            sys.stderr.flush()
            while True:
                time.sleep(3600)
        return super().update(batch)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        logits = super().predict(x)
        if self.hp.fault == "shape":
            return logits[:, :-1]
        if self.hp.fault == "nonfinite":
            return logits * float("nan")
        return logits


@dataclass(frozen=True)
class HiddenStateParams(EngineParams):
    hidden: str = hparam("list", "where the unsaved tensor sits", choices=("list", "object"))


class HiddenState(Vanilla):
    Params = HiddenStateParams
    hp: HiddenStateParams

    def __init__(self, spec: DatasetSpec, hp: Mapping[str, Any], env: TrainEnv) -> None:
        super().__init__(spec, hp, env)
        seen = torch.zeros(env.train_size)
        self.memory = [seen] if self.hp.hidden == "list" else SimpleNamespace(seen=seen)
        self.updates = 0

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.updates += 1
        return super().update(batch)


if "faulty" not in METHODS:
    register_method(
        "faulty", display_name="Faulty", citation="test fixture", needs_bias_labels=False
    )(Faulty)
