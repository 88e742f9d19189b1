"""Feature extractors. Each exposes ``feat_dim``; heads are built by the methods."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from debias_bench.data import DatasetSpec
from debias_bench.errors import UnknownNameError
from torch import nn


class MLP(nn.Module):
    """LfF's Colored MNIST backbone: ``in -> 100 -> 100 -> 100``, ReLU after each layer.

    ``input_div255`` reproduces the official MLPs (LfF, DisEnt, BiasEnsemble, SelecMix,
    ETF-Debias), which divide by 255 a second time after ``ToTensor``, so their inputs lie in
    [0, 1/255]. It changes results a lot, so it is a named protocol switch, not a silent default.
    """

    def __init__(
        self, input_dim: int, hidden: tuple[int, ...] = (100, 100, 100), input_div255: bool = False
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = input_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.layers = nn.Sequential(*layers)
        self.scale = 1.0 / 255.0 if input_div255 else 1.0
        self.feat_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.flatten(1) * self.scale)


def _mlp(spec: DatasetSpec, hp: Mapping[str, Any]) -> nn.Module:
    hidden = tuple(hp.get("mlp_hidden", (100, 100, 100)))
    return MLP(spec.input_dim, hidden, input_div255=bool(hp.get("input_div255", False)))


BACKBONES: dict[str, Callable[[DatasetSpec, Mapping[str, Any]], nn.Module]] = {"mlp": _mlp}


def build_backbone(name: str, spec: DatasetSpec, hp: Mapping[str, Any]) -> nn.Module:
    """Build a backbone by name; it has a ``feat_dim`` attribute."""
    try:
        builder = BACKBONES[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown backbone {name!r}; valid names: {', '.join(BACKBONES)}"
        ) from None
    return builder(spec, hp)
