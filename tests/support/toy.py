"""A tiny in-memory dataset (``toy``): 4 classes of 8x8 RGB noise with a colour shortcut,
registered on import (tests/conftest.py imports it, so every test sees it)."""

from __future__ import annotations

from pathlib import Path

import torch

from debias_bench.data.contract import Split, Splits
from debias_bench.data.family import DatasetFamily
from debias_bench.data.spec import DatasetSpec
from debias_bench.registry import DATASETS


def make_toy_split(n: int, ratio: float, seed: int, name: str) -> Split:
    """4 classes of 8x8 RGB noise with a weak class pattern and a strong colour shortcut."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 4
    conflicting = torch.rand(n, generator=g) < ratio
    biases = torch.where(
        conflicting, (labels + 1 + torch.randint(0, 3, (n,), generator=g)) % 4, labels
    )
    images = torch.rand(n, 8, 8, 3, generator=g) * 0.3
    images[torch.arange(n), labels * 2, :, :] += 0.4  # the class: a bright row
    palette = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 0]])
    images = images + 0.5 * palette[biases][:, None, None, :]  # the shortcut: a colour cast
    return Split((images.clamp(0, 1) * 255).to(torch.uint8), labels, biases, name=name)


class ToyFamily(DatasetFamily):
    spec = DatasetSpec(
        name="toy",
        num_classes=4,
        num_biases=4,
        ratios=(5.0, 20.0),
        image_size=(8, 8),
        channels=3,
        backbone="mlp",
        test_kind="unbiased",
    )

    def prepare(self, ratios=None) -> Path:
        return self.data_root

    def load(self, ratio: float) -> Splits:
        ratio = self.check_ratio(ratio)
        return Splits(
            train=make_toy_split(512, ratio / 100, 1, "train"),
            valid=make_toy_split(128, 0.75, 2, "valid"),
            test=make_toy_split(128, 0.75, 3, "test"),
        )


if "toy" not in DATASETS:
    DATASETS.register("toy", display_name="Toy", citation="test fixture")(ToyFamily)
