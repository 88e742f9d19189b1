"""The LfF npy layout (``alinlab/LfF/make_dataset.py``): import and export.

LfF writes one folder per dataset tag::

    <Tag>/train/images.npy   uint8 N x H x W x 3      <Tag>/train/attrs.npy   N x 2 [label, bias]
    <Tag>/valid/images.npy   ...                        <Tag>/valid/attrs.npy
    <Tag>/attr_names.pkl     ["digit", "color"] or ["object", "corruption"]

Tags: ``ColoredMNIST-Skewed{r}-Severity{s}`` and
``CorruptedCIFAR10-Type{0,1}-Skewed{r}-Severity{s}``, with r the conflicting *fraction*
(0.005 ... 0.05) and s in 1..4 (for CIFAR, Hendrycks level s + 1). LfF's ``valid`` **is its
unbiased test set**: there is no held-out validation split.

* Export writes our ``train`` and our ``test`` (as LfF's ``valid``), so LfF/ETF-Debias code can
  train on data built here. Our held-out ``valid`` split is not part of the LfF layout and is
  written beside it as ``<Tag>/heldout_valid/``, which LfF's loader ignores.
* Import reads a tag folder into ``<data root>/<name>/lff-import/<pct>/{train,valid,test}``;
  since LfF has no validation split, ``valid`` there is a copy of LfF's ``valid`` (the test
  set) and the manifest records ``valid_is_test: true``: model selection on it is the
  ``best-test`` oracle, not an honest ``best-valid``. Load it with the family option
  ``source="imported"`` (or ``"lff"``), for Colored MNIST and Corrupted CIFAR-10.
* ``import_disent`` reads the DisEnt / BiasEnsemble / SelecMix PNG layout of the same two
  datasets (``<root>/<pct>/{align,conflict}/<label>/*``, ``<root>/<pct>/valid``,
  ``<root>/test``; see ``folder_layout``) into the same place; its valid split is a real one.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import ClassVar

import numpy as np

from debias_bench.data.family import DatasetFamily
from debias_bench.data.integrity import MANIFEST, completeness_problems
from debias_bench.data.options import DataOption
from debias_bench.data.spec import DatasetSpec, SplitArrays, SplitLike
from debias_bench.data.split_store import ratio_dirname, save_split
from debias_bench.errors import CorruptDataError, DataNotFoundError

from .folder_layout import (
    find_ratio_dir,
    read_records,
    scan_class_folders,
    scan_flat_or_nested,
)


def read_lff_split(folder: Path, name: str, spec: DatasetSpec) -> SplitArrays:
    """One LfF split, checked against the family's image size and label ranges."""
    for file in ("images.npy", "attrs.npy"):
        if not (folder / file).is_file():
            raise DataNotFoundError(
                f"LfF layout: {folder / file} is missing",
                hint="point at the <Tag> folder that holds train/ and valid/",
            )
    try:
        images = np.load(folder / "images.npy")
        attrs = np.load(folder / "attrs.npy")
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptDataError(f"cannot read {folder}: {exc}") from exc
    want = (*spec.image_size, spec.channels)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != want:
        raise CorruptDataError(
            f"{folder / 'images.npy'}: expected uint8 N x {' x '.join(map(str, want))}, got "
            f"{images.dtype} {images.shape}"
        )
    if attrs.ndim != 2 or attrs.shape[0] != len(images) or attrs.shape[1] < 2:
        raise CorruptDataError(
            f"{folder / 'attrs.npy'}: expected {len(images)} x 2, got {attrs.shape}"
        )
    labels, biases = attrs[:, 0].astype(np.int64), attrs[:, 1].astype(np.int64)
    if labels.min() < 0 or labels.max() >= spec.num_classes or biases.max() >= spec.num_biases:
        raise CorruptDataError(f"{folder / 'attrs.npy'}: labels or biases out of range")
    return SplitArrays(images, labels, biases, name)


def write_lff_split(folder: Path, split: SplitLike) -> None:
    """One split (a loaded ``Split``, on the CPU) in the LfF layout: uint8 images and uint8
    ``[label, bias]`` attrs."""
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "images.npy", np.ascontiguousarray(split.images, dtype=np.uint8))
    attrs = np.stack([np.asarray(split.labels), np.asarray(split.biases)], 1).astype(np.uint8)
    np.save(folder / "attrs.npy", attrs)


def export_lff(family: ImportableFamily, ratio: float, out: Path) -> Path:
    """Write ``family`` at ``ratio`` % as ``out/<Tag>/``; returns that folder."""
    splits = family.load(ratio)
    folder = out / family.lff_tag(ratio)
    write_lff_split(folder / "train", splits.train)
    write_lff_split(folder / "valid", splits.test)  # LfF's "valid" is the unbiased test set
    write_lff_split(folder / "heldout_valid", splits.valid)
    with open(folder / "attr_names.pkl", "wb") as handle:
        pickle.dump(list(family.lff_attr_names), handle)
    return folder


def imported_folder(family: DatasetFamily, ratio: float) -> Path:
    return family.data_root / family.spec.name / "lff-import" / ratio_dirname(ratio)


def import_lff(family: DatasetFamily, source: Path, ratio: float) -> Path:
    """Copy an LfF ``<Tag>`` folder into our store for ``ratio``; returns the folder."""
    ratio = family.check_ratio(ratio)
    if not source.is_dir():
        raise DataNotFoundError(f"LfF folder {source} does not exist")
    train = read_lff_split(source / "train", "train", family.spec)
    test = read_lff_split(source / "valid", "test", family.spec)
    target = imported_folder(family, ratio)

    def write(staging: Path) -> None:
        save_split(staging / "train", train)
        save_split(staging / "valid", test)
        save_split(staging / "test", test)

    params = {"source": str(source), "format": "lff-npy", "ratio": ratio, "valid_is_test": True}
    shape = (family.spec.num_classes, family.spec.num_biases)
    # built beside the imported folder and swapped in, as every prepared dataset
    return family.build_into(target, True, write, lambda: params, shape)


def import_disent(family: DatasetFamily, root: Path, ratio: float) -> Path:
    """Read the DisEnt PNG layout (``cmnist/`` or ``cifar10c/`` folder) for ``ratio``."""

    ratio = family.check_ratio(ratio)
    spec = family.spec
    what = f"{spec.name} (DisEnt layout)"
    pct = find_ratio_dir(root, ratio, what)
    train = []
    for part in ("align", "conflict"):
        train += scan_class_folders(pct / part, spec.num_classes, f"{what} {pct.name}/{part}")
    parts = {
        "train": train,
        "valid": scan_flat_or_nested(pct / "valid", spec.num_classes, f"{what} valid"),
        "test": scan_flat_or_nested(root / "test", spec.num_classes, f"{what} test"),
    }
    target = imported_folder(family, ratio)

    def write(staging: Path) -> None:
        for name, recs in parts.items():
            (staging / name).mkdir(parents=True)
            read_records(recs, spec.image_size, f"{spec.name} {name}", staging / name)

    params = {"source": str(root), "format": "disent-png", "ratio": ratio, "valid_is_test": False}
    shape = (spec.num_classes, spec.num_biases)
    return family.build_into(target, True, write, lambda: params, shape)


def imported_split_dirs(family: DatasetFamily, ratio: float) -> tuple[Path, dict[str, Path]]:
    """(manifest folder, split folders) of the data ``bench data import`` put in for ``ratio``."""
    root = imported_folder(family, ratio)
    if not (root / MANIFEST).is_file():
        raise DataNotFoundError(
            f"no imported data for {family.spec.name} at {ratio:g}% ({root})",
            hint=f"run `bench data import {family.spec.name} <LfF Tag folder or DisEnt folder> "
            f"--ratio {ratio:g}`",
        )
    return root, {s: root / s for s in ("train", "valid", "test")}


class ImportableFamily(DatasetFamily):
    """A family that builds its own splits (``source=build``) or reads the ones ``bench data
    import`` put in from the LfF npy or DisEnt PNG layouts (``source=imported``, alias ``lff``):
    Colored MNIST and Corrupted CIFAR-10. Builds keep one train folder per ratio beside shared
    valid and test folders."""

    source = DataOption(
        str,
        "build",
        "build: from the raw sources; imported (alias lff): data from `bench data import`",
        choices=("build", "imported", "lff"),
    )

    #: LfF's names of the target and the bias (its ``attr_names.pkl``); empty: LfF has no such
    #: dataset (``bench data export`` refuses it)
    lff_attr_names: ClassVar[tuple[str, ...]] = ()

    def lff_tag(self, ratio: float) -> str:
        """LfF's folder name for this build at ``ratio`` % (families with ``lff_attr_names``)."""
        raise NotImplementedError(f"LfF has no {self.spec.name} dataset")

    @property
    def imported(self) -> bool:
        return self.source in ("imported", "lff")

    def is_prepared(self) -> bool:
        if self.imported:  # complete, as ``DatasetFamily.is_prepared``
            folders = [imported_folder(self, r) for r in self.spec.ratios]
            return not any(completeness_problems(folder) for folder in folders)
        return super().is_prepared()

    def _manifest_root(self, ratio: float) -> Path | None:
        if self.imported:  # also where `bench data import` left a swap unfinished
            return imported_folder(self, ratio)
        return super()._manifest_root(ratio)

    def split_dirs(self, ratio: float) -> tuple[Path, dict[str, Path]]:
        if self.imported:  # one folder per ratio
            return imported_split_dirs(self, ratio)
        return self.folder, {
            "train": self.folder / ratio_dirname(ratio) / "train",
            "valid": self.folder / "valid",
            "test": self.folder / "test",
        }

    def repair_command(self) -> str:
        if self.imported:
            return f"bench data import {self.spec.name} <source folder> --ratio <ratio>"
        return super().repair_command()


def exports_lff(family: type) -> bool:
    """Whether ``bench data export`` can write ``family`` in the LfF npy layout."""
    return issubclass(family, ImportableFamily) and bool(family.lff_attr_names)
