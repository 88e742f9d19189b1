"""Shared plumbing of the 224-px families (BFFHQ, Dogs & Cats, BAR).

Each is decoded once into the npy split store of ``debias_bench.family``::

    <folder>/<pct>/train/{images,attrs}.npy   one per ratio
    <folder>/<pct>/valid/...  or  <folder>/valid/...   (per ratio when the source has it so)
    <folder>/test/...

and loaded as memory maps, so training reads pixels, never JPEG/PNG. A subclass says where its
source is (``find_source``) and how to turn it into splits (``build``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from debias_bench.data import Splits
from debias_bench.errors import DataNotFoundError
from debias_bench.family import DatasetFamily, load_split, publish_dataset, ratio_dirname

#: the normalisation DisEnt / BiasEnsemble / LfF use, also on the 224-px sets
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)
#: share of the held-out conflicting images that goes to valid (the rest: test)
VALID_FRACTION = 0.2


class CachedImageFamily(DatasetFamily):
    """A family whose prepared splits are memory-mapped uint8 arrays at ``spec.image_size``."""

    def __init__(self, raw_root: Path, data_root: Path, data_seed: int = 0, **options: Any) -> None:
        super().__init__(raw_root, data_root, **options)
        self.data_seed = int(data_seed)

    @property
    def tag(self) -> str:
        """Folder name of one build (its options)."""
        return f"{self.source_kind()}-seed{self.data_seed}"

    @property
    def folder(self) -> Path:
        return self.data_root / self.spec.name / f"v{self.build_version}" / self.tag

    def version(self) -> str:
        return f"{super().version()}/{self.tag}"

    def params(self) -> dict[str, Any]:
        return {
            "source": str(self.find_source()),
            "source_kind": self.source_kind(),
            "data_seed": self.data_seed,
            "image_size": list(self.spec.image_size),
            "build_version": self.build_version,
        }

    @abstractmethod
    def find_source(self) -> Path:
        """The raw release or published folder to build from; DataNotFoundError if none."""

    def source_kind(self) -> str:
        """A short name of the kind of source (e.g. 'release', 'biasensemble')."""
        return "release"

    @abstractmethod
    def build(self, staging: Path) -> None:
        """Write every ratio's splits under ``staging``."""

    def prepare(self, ratios: Iterable[float] | None = None) -> Path:
        for r in ratios or self.spec.ratios:
            self.check_ratio(r)
        if self.is_prepared():
            return self.folder
        staging = self.folder.with_name(self.folder.name + ".building")
        if staging.exists():
            import shutil

            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        self.build(staging)
        shape = (self.spec.num_classes, self.spec.num_biases)
        publish_dataset(staging, self.folder, self.params(), shape=shape)
        return self.folder

    def load(self, ratio: float) -> Splits:
        ratio = self.check_ratio(ratio)
        self.prepare([ratio])
        pct = self.folder / ratio_dirname(ratio)
        valid = pct / "valid" if (pct / "valid").is_dir() else self.folder / "valid"
        return Splits(
            train=load_split(pct / "train", "train", mmap=True),
            valid=load_split(valid, "valid", mmap=True),
            test=load_split(self.folder / "test", "test", mmap=True),
        )


def conflicting_counts(aligned_counts: dict[int, int], ratio: float) -> dict[int, int]:
    """Conflicting images per class so that they are ``ratio`` % of the class's training set:
    ``round(n_aligned * r / (100 - r))``."""
    return {c: round(n * ratio / (100.0 - ratio)) for c, n in aligned_counts.items()}


def partition_conflicting(
    pool: dict[int, list[Any]],
    train_max: dict[int, int],
    valid_fraction: float,
    rng: Any,
) -> tuple[dict[int, list[Any]], list[Any], list[Any]]:
    """Split each class's bias-conflicting pool (in a seeded random order) into a training
    reserve of ``train_max[c]`` items (a ratio's training set takes its first ones, so the
    1 % set is inside the 5 % set), then valid (``valid_fraction`` of the rest) and test."""
    reserve: dict[int, list[Any]] = {}
    valid: list[Any] = []
    test: list[Any] = []
    for c in sorted(pool):
        items = [pool[c][i] for i in rng.permutation(len(pool[c]))]
        if train_max[c] > len(items):
            raise ValueError(f"class {c}: {train_max[c]} conflicting needed, {len(items)} exist")
        reserve[c] = items[: train_max[c]]
        rest = items[train_max[c] :]
        n_valid = round(len(rest) * valid_fraction)
        valid += rest[:n_valid]
        test += rest[n_valid:]
    return reserve, valid, test


def resolve_source(family: CachedImageFamily, release: Path, layout: Path, how: str) -> Path:
    """``source`` option: 'release' (build), 'biasensemble' (read), or 'auto' (first found)."""
    choice = family.options.get("source", "auto")
    options = {"release": [release], "biasensemble": [layout], "auto": [release, layout]}
    if choice not in options:
        raise DataNotFoundError(f"source must be one of {', '.join(options)}, got {choice!r}")
    for path in options[choice]:
        if path.exists():
            return path
    where = "\n    ".join(str(p) for p in options[choice])
    raise DataNotFoundError(f"{family.spec.name}: raw data not found; looked at:\n    {where}", how)
