"""The data of a perf cell: uint8 noise tensors shaped like a dataset (its ``DatasetSpec``), with
random labels and bias labels, served by a stand-in dataset family, so nothing is downloaded
(the "Data" section of :mod:`debias_bench.perf.speed`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch

from debias_bench.data.contract import Split, Splits
from debias_bench.data.family import DatasetFamily
from debias_bench.data.spec import DatasetSpec


def synthetic_split(spec: DatasetSpec, n: int, seed: int, name: str) -> Split:
    """``n`` uint8 noise images of ``spec``'s shape with random labels and bias labels."""
    g = torch.Generator().manual_seed(seed)
    h, w = spec.image_size
    images = torch.randint(0, 256, (n, h, w, spec.channels), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, spec.num_classes, (n,), generator=g)
    biases = torch.randint(0, spec.num_biases, (n,), generator=g)
    return Split(images, labels, biases, name=name)


class SyntheticFamily(DatasetFamily):
    """A dataset family serving synthetic splits of another family's spec (no files); made
    with :meth:`of`, one subclass per spec (a family's spec is a class attribute)."""

    def __init__(self, train_size: int, eval_size: int = 256) -> None:
        super().__init__(Path("."), Path("."))
        self.train_size, self.eval_size = train_size, eval_size

    @classmethod
    def of(cls, spec: DatasetSpec, train_size: int, eval_size: int = 256) -> SyntheticFamily:
        """A family standing in for the one whose spec is ``spec``."""
        return type(f"Synthetic_{spec.name}", (cls,), {"spec": spec})(train_size, eval_size)

    def prepare(self, ratios: Iterable[float] | None = None, force: bool = False) -> Path:
        return self.data_root

    def load(self, ratio: float) -> Splits:
        return Splits(
            train=synthetic_split(self.spec, self.train_size, 0, "train"),
            valid=synthetic_split(self.spec, self.eval_size, 1, "valid"),
            test=synthetic_split(self.spec, self.eval_size, 2, "test"),
        )

    def version(self) -> str:
        return f"synthetic-{self.spec.name}"


def train_size_for(batch_size: int) -> int:
    """Synthetic training-set size: a few batches per epoch, at most 4096 images."""
    return min(4096, 8 * batch_size)
