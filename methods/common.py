"""Pieces shared by several methods."""

from __future__ import annotations

import torch
from torch import nn

from debias_bench.backbones import Backbone, build_backbone, init_head
from debias_bench.data import DatasetSpec
from debias_bench.method import HParams


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
    spec: DatasetSpec, hp: HParams, device: torch.device, bias: bool = True
) -> Classifier:
    """The dataset's backbone (``hp['backbone']``) with a ``num_classes`` head, on ``device``."""
    return Classifier(build_backbone(hp["backbone"], spec, hp), spec.num_classes, bias).to(device)
