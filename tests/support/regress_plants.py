"""A plugin method with a planted regression on cue, for the regression check's tests.

``planted_vanilla`` is Vanilla with one more declared hyperparameter, ``plant``: ``none``
trains exactly as Vanilla; ``skip_odd_steps`` computes the loss of every batch but takes the
optimiser step on every other one only (the kind of bug a refactor of a training loop plants),
``skip_3_of_4`` on every fourth one only.
The cell of both is ``DATASET/planted_vanilla/rR/PROTOCOL``, so a baseline of ``plant=none``
checks the planted runs. Loaded as plugins are (``BENCH_PLUGINS`` names this file), so that the
local launcher's workers import it too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from debias_bench.config.hparams import EngineParams, hparam
from debias_bench.data.contract import Batch
from debias_bench.data.spec import DatasetSpec
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import METHODS, register_method
from debias_bench.training.method import TrainEnv

PLANTS = ("none", "skip_odd_steps", "skip_3_of_4")
#: how many updates of each cycle take their optimiser step
EVERY = {"skip_odd_steps": 2, "skip_3_of_4": 4}


@dataclass(frozen=True)
class PlantedParams(EngineParams):
    plant: str = hparam("none", "the planted regression", choices=PLANTS)


class PlantedVanilla(Vanilla):
    Params = PlantedParams
    hp: PlantedParams

    def __init__(self, spec: DatasetSpec, hp: Mapping[str, Any], env: TrainEnv) -> None:
        super().__init__(spec, hp, env)
        self.updates = torch.zeros((), dtype=torch.long)  # a tensor: checkpointed

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.updates += 1
        every = EVERY.get(self.hp.plant)
        if every is not None and int(self.updates) % every != 0:
            with torch.no_grad():
                loss = F.cross_entropy(self.model(batch.x), batch.y)
            return {"loss": loss}
        return super().update(batch)


if "planted_vanilla" not in METHODS:
    register_method(
        "planted_vanilla",
        display_name="Planted Vanilla",
        citation="test fixture",
        needs_bias_labels=False,
    )(PlantedVanilla)
