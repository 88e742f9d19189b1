"""Pieces shared by several methods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from debias_bench.config.hparams import EngineParams
from debias_bench.data.spec import DatasetSpec
from debias_bench.training.backbones import Backbone, build_backbone, init_head


class Classifier(nn.Module):
    """A backbone followed by a linear head: the plain model most methods train."""

    def __init__(self, backbone: Backbone, num_classes: int, bias: bool = True) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = init_head(backbone, nn.Linear(backbone.feat_dim, num_classes, bias=bias))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def make_classifier(
    spec: DatasetSpec, hp: EngineParams | Mapping[str, Any], device: torch.device, bias: bool = True
) -> Classifier:
    """The run's backbone (``hp.backbone``) with a ``num_classes`` head, on ``device`` (``hp``:
    the run's typed params, used as they are, or a dict of resolved values)."""
    params = EngineParams.of(hp)
    backbone = build_backbone(params.backbone, spec, params)
    return Classifier(backbone, spec.num_classes, bias).to(device)
