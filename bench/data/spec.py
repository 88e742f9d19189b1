"""What a dataset is, and a split's arrays as a build writes them, without torch.

Registering a dataset family, listing the datasets and presets and resolving a configuration
read only a family's :class:`DatasetSpec` (and the families' declared facts), so this module,
and everything the ``debias_bench.datasets`` modules import when they register, imports NumPy
and no torch: ``bench list datasets``, ``bench list presets`` and ``bench config`` start
without it. The torch parts of the contract (``Split``, ``Splits``, batches, the training
stream) are in ``debias_bench.data.contract``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np


@dataclass(frozen=True)
class DatasetSpec:
    """What a method and the engine need to know about a dataset family."""

    name: str
    num_classes: int
    num_biases: int
    ratios: tuple[float, ...]
    image_size: tuple[int, int]  # (height, width) in pixels, as the splits store the images
    channels: int
    backbone: str
    test_kind: str  # "unbiased" (bias uniform) or "conflicting" (bias-conflicting samples only)
    class_names: tuple[str, ...] = ()
    bias_names: tuple[str, ...] = ()
    mean: tuple[float, ...] | None = None  # normalisation after scaling to [0, 1]
    std: tuple[float, ...] | None = None
    crop_padding: int = 0  # training augmentation: random crop with this padding
    hflip: bool = False  # training augmentation: random horizontal flip

    @property
    def input_dim(self) -> int:
        return self.channels * self.image_size[0] * self.image_size[1]

    @property
    def size_text(self) -> str:
        """``HxW`` (height by width): ``28x28``, ``64x32``."""
        return f"{self.image_size[0]}x{self.image_size[1]}"


class SplitArrays(NamedTuple):
    """One split as a dataset build makes it or an import reads it, in NumPy arrays, before
    it is a torch ``Split``: uint8 images ``N x H x W x C``, integer labels and bias labels
    (``split_store.save_split`` writes it; ``split_loading.load_split`` reads a ``Split``)."""

    images: np.ndarray
    labels: np.ndarray
    biases: np.ndarray
    name: str = ""


class SplitLike(Protocol):
    """What the store and the range checks read of a split: a :class:`SplitArrays` or a torch
    ``Split`` (CPU tensors go through ``np.asarray`` without importing torch here)."""

    @property
    def images(self) -> Any: ...

    @property
    def labels(self) -> Any: ...

    @property
    def biases(self) -> Any: ...


def out_of_range(values: Any, size: int) -> tuple[int, int, int] | None:
    """(how many, the first one's position, its value) of the entries of ``values`` (an array
    or a CPU tensor) outside ``0 .. size - 1``; None when every entry is in range (one min and
    one max when it is)."""
    array = np.asarray(values)
    if not len(array) or (array.min() >= 0 and array.max() < size):
        return None
    bad = np.flatnonzero((array < 0) | (array >= size))
    return len(bad), int(bad[0]), int(array[bad[0]])


def range_problems(
    split: str,
    labels: Any,
    biases: Any,
    num_classes: int,
    num_biases: int,
) -> list[str]:
    """What of one split's labels and bias labels (arrays or CPU tensors) lies outside its
    dataset's classes and biases, one phrase each:
    ``3 test labels outside 0..9 (first: item 17, value 10)``."""
    problems = []
    for what, values, size in (("label", labels, num_classes), ("bias label", biases, num_biases)):
        found = out_of_range(values, size)
        if found is not None:
            count, first, value = found
            plural = "s" if count > 1 else ""
            problems.append(
                f"{count} {split} {what}{plural} outside 0..{size - 1} "
                f"(first: item {first}, value {value})"
            )
    return problems


def _dtype_text(values: Any) -> str:
    """The dtype of an array or a tensor as NumPy names it (``float32``), without torch."""
    return str(getattr(values, "dtype", type(values).__name__)).removeprefix("torch.")


def _non_finite_rows(images: Any) -> tuple[int, int] | None:
    """(how many, the first one's position) of the images holding a NaN or infinite pixel,
    for floating-point images (uint8 ones cannot); None when there is none."""
    if "float" not in _dtype_text(images):
        return None
    array = np.asarray(images, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(array.reshape(len(array), -1)).all(axis=1))
    return (len(bad), int(bad[0])) if len(bad) else None


def split_problems(name: str, split: SplitLike, spec: DatasetSpec) -> list[str]:
    """What in one split breaks the dataset contract, one phrase each: an empty split,
    labels or bias labels that are not integers (``the valid labels are float32``) or lie
    outside the spec's classes, images with NaN or infinite pixels, and a training split of
    one class (a model learns nothing from it)."""
    if not len(split.labels):
        return [f"the {name} split is empty"]
    problems = []
    whole = True
    for what, values in (("labels", split.labels), ("bias labels", split.biases)):
        dtype = _dtype_text(values)
        if not (dtype.startswith(("int", "uint")) or dtype == "long"):
            problems.append(f"the {name} {what} are {dtype}, not integers")
            whole = False
    if whole:
        problems += range_problems(
            name, split.labels, split.biases, spec.num_classes, spec.num_biases
        )
    bad = _non_finite_rows(split.images)
    if bad is not None:
        count, first = bad
        plural = "s hold" if count > 1 else " holds"
        problems.append(
            f"{count} {name} image{plural} NaN or infinite pixels (first: item {first})"
        )
    if whole and name == "train" and spec.num_classes > 1:
        classes = np.unique(np.asarray(split.labels))
        if len(classes) == 1:
            problems.append(
                f"the train split holds one class ({int(classes[0])}) of {spec.num_classes}: "
                "a model learns nothing from it"
            )
    return problems


def splits_problems(splits: Iterable[SplitLike], spec: DatasetSpec) -> list[str]:
    """``split_problems`` of the train, valid and test splits (``Splits`` iterates in that
    order) against ``spec``."""
    names = ("train", "valid", "test")
    return [
        problem
        for name, split in zip(names, splits, strict=True)
        for problem in split_problems(name, split, spec)
    ]
