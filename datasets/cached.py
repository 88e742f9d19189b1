"""Shared plumbing of the 224-px families (BFFHQ, Dogs & Cats, BAR).

Each is decoded once into the npy split store of ``debias_bench.data.family``::

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
from typing import Any, ClassVar

from debias_bench.data.family import DatasetFamily
from debias_bench.data.options import DataOption
from debias_bench.data.spec import DatasetSpec
from debias_bench.data.split_store import ratio_dirname
from debias_bench.errors import DataNotFoundError

#: the normalisation DisEnt / BiasEnsemble / LfF use, also on the 224-px sets
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)
#: share of the held-out conflicting images that goes to valid (the rest: test)
VALID_FRACTION = 0.2
#: ``--preset smoke`` and ``--preset ci`` on the image sets: a small build (or subset) read at
#: 16 px by the paper's ResNet-20, a few seconds a run on a CPU (a 224-px ResNet-18 takes seconds
#: a step). DeNetDM skips 16 px (its image branches need 32); at 32 px it would fail on BFFHQ and
#: Dogs & Cats anyway (its deep ResNet-18 branch and the preset's ResNet-20 differ in width).
SMALL_16PX: dict[str, Any] = {"backbone": "resnet20", "batch_size": 32, "image_size": 16}


def photo_spec(
    name: str,
    class_names: tuple[str, ...],
    bias_names: tuple[str, ...],
    ratios: tuple[float, ...] = (1.0, 5.0),
    backbone: str = "resnet18",
) -> DatasetSpec:
    """The spec of a real photo set as the DisEnt / BiasEnsemble line trains on it: 224-px RGB,
    the CIFAR normalisation, random crops (padding 4) and flips, a bias-conflicting test set."""
    return DatasetSpec(
        name=name,
        num_classes=len(class_names),
        num_biases=len(bias_names),
        ratios=ratios,
        image_size=(224, 224),
        channels=3,
        backbone=backbone,
        test_kind="conflicting",
        class_names=class_names,
        bias_names=bias_names,
        mean=CIFAR_MEAN,
        std=CIFAR_STD,
        crop_padding=4,
        hflip=True,
    )


class CachedImageFamily(DatasetFamily):
    """A family whose prepared splits are memory-mapped uint8 arrays at ``spec.image_size``."""

    memory_mapped = True
    #: the kinds of source it can build from, in the order ``source=auto`` looks for them
    source_kinds: ClassVar[tuple[str, ...]] = ("release",)

    @property
    def tag(self) -> str:
        """Folder name of one build (its options)."""
        return self._tag_of(self.prepared_kind())

    def prepared_kind(self) -> str:
        """The source kind of the build to read: the one found in the raw root, or, with the raw
        sources gone, the kind of a build already prepared."""
        try:
            return self.source_kind()
        except DataNotFoundError:
            for kind in self.source_kinds:
                if (self._folder_of(kind) / "manifest.json").is_file():
                    return kind
            raise

    def _folder_of(self, kind: str) -> Path:
        return self.data_root / self.spec.name / f"v{self.build_version}" / self._tag_of(kind)

    def _tag_of(self, kind: str) -> str:
        return f"{kind}-seed{self.data_seed}" + self.tag_suffix()

    def tag_suffix(self) -> str:
        """What a subclass's own options add to the folder name."""
        return ""

    @property
    def folder(self) -> Path:
        return self._folder_of(self.prepared_kind())

    def version(self) -> str:
        return f"{super().version()}/{self.folder.name}"

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

    def find_raw(self) -> Path:
        return self.find_source()

    def source_kind(self) -> str:
        """A short name of the kind of source (e.g. 'release', 'biasensemble')."""
        return "release"

    @abstractmethod
    def build(self, staging: Path) -> None:
        """Write every ratio's splits under ``staging``."""

    def prepare(self, ratios: Iterable[float] | None = None, force: bool = False) -> Path:
        for r in ratios or self.spec.ratios:
            self.check_ratio(r)
        try:
            folder = self._folder_of(self.source_kind())  # building needs the raw source
        except DataNotFoundError:
            if self.is_prepared() and not force:  # raw sources gone, a build of another kind
                return self.folder
            raise
        shape = (self.spec.num_classes, self.spec.num_biases)
        return self.build_into(folder, force, self.build, self.params, shape)

    def is_prepared(self) -> bool:
        try:
            return super().is_prepared()
        except DataNotFoundError:  # no raw source and nothing prepared
            return False

    def split_dirs(self, ratio: float) -> tuple[Path, dict[str, Path]]:
        pct = self.folder / ratio_dirname(ratio)
        valid = pct / "valid" if (pct / "valid").is_dir() else self.folder / "valid"
        return self.folder, {"train": pct / "train", "valid": valid, "test": self.folder / "test"}


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
    choice = str(family.option_values()["source"])  # declared by each subclass (source_option)
    options = {"release": [release], "biasensemble": [layout], "auto": [release, layout]}
    for path in options[choice]:
        if path.exists():
            return path
    where = "\n    ".join(str(p) for p in options[choice])
    raise DataNotFoundError(f"{family.spec.name}: raw data not found; looked at:\n    {where}", how)


def source_option(doc: str) -> DataOption[str]:
    """The ``source`` option of a family built from a release or read from BiasEnsemble's
    layout."""
    return DataOption(str, "auto", doc, choices=("auto", "release", "biasensemble"))
