"""Waterbirds (Sagawa et al., ICLR 2020): CUB birds pasted onto Places backgrounds.

Target: bird type (0 = landbird, 1 = waterbird); bias: background (0 = land, 1 = water);
aligned = landbirds on land and waterbirds on water. Read from the release as it unpacks,
under ``<raw root>/waterbirds/``::

    waterbird_complete95_forest2water2/metadata.csv     Sagawa et al.'s tarball
    waterbird_complete95_forest2water2/<species>/<image>.jpg
    waterbirds_v1.0/metadata.csv                         the WILDS copy (same columns)

``metadata.csv`` has one row per image: ``img_id, img_filename, y, split, place,
place_filename``; ``split`` 0 / 1 / 2 is the official train / validation / test split, used as
published (4,795 / 1,199 / 5,794 images in the release). The training split is 95 %
bias-aligned (its groups: 3,498 landbirds on land, 184 on water, 56 waterbirds on land, 1,057 on
water; 240 of 4,795 conflicting, 5.0 %), so the one ratio it runs at is 5; validation and test
hold each class equally on both backgrounds.

Images are decoded once as GroupDRO's ``get_transform_cub`` frames them without augmentation
(``Resize((256, 256))`` then ``CenterCrop(224)``), with ImageNet normalisation; the default
backbone is the ImageNet-pretrained ResNet-50 of GroupDRO, JTT and DFR.

The **adjusted average** that Sagawa et al. and DFR report on Waterbirds is the test accuracy
of each (class, background) group weighted by that group's share of the training split
(:data:`TRAIN_GROUP_COUNTS`, the release's), which undoes the test split's balancing;
``adjusted_average`` computes it. The family declares those weights as ``adjusted_weights``, and
``bench report --table subpop`` shows it in its ``adjusted avg.`` column, computed from the
group accuracies each run records (the release's weights, whatever build a run trained on: a
``--preset smoke`` build's 40 images a group too); ``--compare-paper`` compares it with the
published averages (``results/reference/subpop_waterbirds_celeba.yaml``'s ``adjusted_average``).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from debias_bench.config import selection
from debias_bench.data.download import Download, RemoteFile
from debias_bench.data.family import PresetValues, fixture_root
from debias_bench.errors import CorruptDataError
from debias_bench.registry import register_dataset

from .cached import SMALL_16PX
from .metadata_family import SPLITS, Framing, MetadataFamily, Row, subpop_spec

RELEASE = "waterbird_complete95_forest2water2"
WILDS = "waterbirds_v1.0"
COLUMNS = ("img_id", "img_filename", "y", "split", "place", "place_filename")
#: the release's training split per (bird, background): Sagawa et al. 2020, Appendix C.1
#: (the counts of its metadata.csv); the weights of the adjusted average
TRAIN_GROUP_COUNTS = ((3498, 184), (56, 1057))
#: Sagawa et al.'s tarball, at the two addresses the group_DRO README and the codes that
#: download it use (the WILDS copy's CodaLab bundle is gone). No checksum of it is published
#: anywhere we could find [unverified], so none is pinned: `bench data download` prints the
#: SHA-256 it got, and the build checks every image metadata.csv lists.
TARBALL = RemoteFile(
    f"{RELEASE}.tar.gz",
    urls=(
        f"https://downloads.cs.stanford.edu/nlp/data/dro/{RELEASE}.tar.gz",
        f"https://nlp.stanford.edu/data/dro/{RELEASE}.tar.gz",
    ),
    unpack=True,
)
REMOTE = Download(
    target="waterbirds",
    files=(TARBALL,),
    present=(f"waterbirds/{RELEASE}/metadata.csv",),
    note=f"Waterbirds: Sagawa et al.'s {RELEASE}.tar.gz (about 0.5 GB; no published checksum: "
    "the images metadata.csv lists are checked when it is prepared)",
)
#: what ``--preset smoke`` and ``--preset ci`` build: the first 40 images of each group
SMALL_BUILD: dict[str, Any] = {"limit_per_group": 40}


def adjusted_average(
    group_accuracy: Sequence[Sequence[float | None]],
    weights: Sequence[Sequence[int]] = TRAIN_GROUP_COUNTS,
) -> float | None:
    """:func:`debias_bench.config.selection.adjusted_average` with the release's training
    groups as the weights by default."""
    return selection.adjusted_average(group_accuracy, weights)


@register_dataset(
    "waterbirds",
    display_name="Waterbirds",
    citation="Sagawa et al., Distributionally Robust Neural Networks for Group Shifts, ICLR "
    "2020 (images from Wah et al., CUB-200-2011, and Zhou et al., Places)",
)
class Waterbirds(MetadataFamily):
    spec = subpop_spec("waterbirds", ("landbird", "waterbird"), ("land", "water"), ratio=5.0)
    build_version = "1"
    source_kinds = ("release", "wilds", "fixture")
    framing = Framing(resize=(256, 256), crop_to_size=True)
    listing = "metadata.csv"
    presets: ClassVar[Mapping[str, PresetValues]] = {
        # a ResNet-20 from scratch at 16 px on a small build: nothing to download
        "smoke": PresetValues(SMALL_16PX, SMALL_BUILD),
        "ci": PresetValues(SMALL_16PX, SMALL_BUILD),
    }
    train_sizes: ClassVar[Mapping[float, int]] = {5.0: 4_795}
    valid_split = "the release's validation split (split 1), each class equally on both backgrounds"
    #: (class x bias) weights of the adjusted average (the release's training groups), which
    #: the ``subpop`` table reads (``debias_bench.reporting.records.adjusted_weights``)
    adjusted_weights: ClassVar[tuple[tuple[int, ...], ...]] = TRAIN_GROUP_COUNTS

    @property
    def how_to_get(self) -> str:
        return (
            "run `bench data download waterbirds`, or unpack Sagawa et al.'s "
            f"{RELEASE}.tar.gz (or the WILDS {WILDS} folder) into <raw root>/waterbirds/; for a "
            "pipeline test without the data run `bench data fixture waterbirds`"
        )

    def remote(self) -> Download:
        return REMOTE

    def candidates(self) -> list[tuple[str, Path]]:
        home = self.raw_root / "waterbirds"
        fixture = fixture_root(self.data_root) / "waterbirds" / RELEASE
        return [("release", home / RELEASE), ("wilds", home / WILDS), ("fixture", fixture)]

    def found(self, folder: Path) -> bool:
        return (folder / "metadata.csv").is_file()

    def rows(self) -> list[Row]:
        return read_metadata(self.find_source())

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """A tiny release (metadata.csv and JPEGs) at ``<raw root>/waterbirds/``."""
        write_release(self.raw_root / "waterbirds" / RELEASE, scale=per_class or 1)
        return {}


def read_metadata(folder: Path) -> list[Row]:
    """The rows of ``folder/metadata.csv``, checked: its columns, and y, place and split in
    their ranges (the line named otherwise)."""
    path = folder / "metadata.csv"
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        present = reader.fieldnames or ()
        missing = [c for c in ("img_filename", "y", "split", "place") if c not in present]
        if missing:
            raise CorruptDataError(
                f"{path}: no column {', '.join(missing)} (expected {', '.join(COLUMNS)})",
                hint="this is not the Waterbirds metadata.csv; unpack the release again",
            )
        rows = []
        for line, entry in enumerate(reader, start=2):
            try:
                y, place, split = int(entry["y"]), int(entry["place"]), int(entry["split"])
            except (TypeError, ValueError):
                raise CorruptDataError(
                    f"{path} line {line}: y, place and split must be integers, got "
                    f"{entry.get('y')!r}, {entry.get('place')!r}, {entry.get('split')!r}"
                ) from None
            if y not in (0, 1) or place not in (0, 1) or split not in (0, 1, 2):
                raise CorruptDataError(
                    f"{path} line {line}: y={y}, place={place}, split={split} (y and place are "
                    "0 or 1, split 0, 1 or 2)"
                )
            rows.append(Row(folder / entry["img_filename"], y, place, SPLITS[split]))
    if not rows:
        raise CorruptDataError(f"{path} lists no images")
    return rows


#: the fixture's images per official split and (bird, background) group: the release's shape
#: (a 95 %-aligned training split, balanced validation and test) at a few dozen images
FIXTURE_COUNTS = {
    "train": ((38, 2), (1, 19)),
    "valid": ((4, 4), (4, 4)),
    "test": ((5, 5), (5, 5)),
}
_SPECIES = ("001.Black_footed_Albatross", "118.House_Sparrow")


def _fixture_image(label: int, place: int, rng: np.random.Generator) -> Image.Image:
    """A small noise image (not square, as the release's): a bird-type band and a
    background colour cast."""
    h, w = 24, 30
    img = rng.integers(0, 110, (h, w, 3)).astype(np.int16)
    rows = slice(4, 10) if label == 0 else slice(14, 20)
    img[rows, 8:22] += 120
    img[..., 1 if place == 0 else 2] += 50
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def write_release(
    root: Path,
    counts: Mapping[str, Sequence[Sequence[int]]] = FIXTURE_COUNTS,
    scale: int = 1,
    seed: int = 0,
) -> Path:
    """A synthetic Waterbirds release at ``root`` (the ``waterbird_complete95_forest2water2``
    folder): ``metadata.csv`` in the release's columns and one JPEG per row, ``counts[split]
    [y][place] * scale`` of each group (pipeline tests only: results on it mean nothing)."""
    rng = np.random.default_rng(seed)
    lines = [",".join(COLUMNS)]
    img_id = 1
    for split_no, split in enumerate(SPLITS):
        for y, by_place in enumerate(counts[split]):
            for place, n in enumerate(by_place):
                for _ in range(n * scale):
                    name = f"{_SPECIES[y]}/{_SPECIES[y].split('.')[1]}_{img_id:04d}.jpg"
                    (root / name).parent.mkdir(parents=True, exist_ok=True)
                    _fixture_image(y, place, rng).save(root / name, quality=90)
                    where = ("l/lake/natural", "b/bamboo_forest")[1 - place]
                    lines.append(
                        f"{img_id},{name},{y},{split_no},{place},/{where}/{img_id:08d}.jpg"
                    )
                    img_id += 1
    (root / "metadata.csv").write_text("\n".join(lines) + "\n")
    return root
