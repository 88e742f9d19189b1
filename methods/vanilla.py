"""Vanilla: empirical risk minimisation with cross-entropy, the reference of every table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from debias_bench.config.hparams import EngineParams
from debias_bench.data.contract import Batch
from debias_bench.data.spec import DatasetSpec
from debias_bench.training.method import Method, TrainEnv

from .common import make_classifier


class Vanilla(Method):
    def __init__(
        self, spec: DatasetSpec, hp: EngineParams | Mapping[str, Any], env: TrainEnv
    ) -> None:
        super().__init__(spec, hp, env)
        self.model = make_classifier(spec, self.hp, self.device)
        self.optimizer = self.optimizer_for(self.model)
        self.scheduler = self.scheduler_for(self.optimizer)

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        loss = F.cross_entropy(self.model(batch.x), batch.y)
        self.step(loss, (self.optimizer, self.scheduler))
        return {"loss": loss.detach()}

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.features(x)

    def backbone_module(self) -> torch.nn.Module:
        return self.model.backbone

    def classifier_weight(self) -> torch.Tensor:
        return self.model.head.weight
