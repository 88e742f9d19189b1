"""Biased FFHQ (BFFHQ), read from its published layout (DisEnt / BiasEnsemble release).

Target: age (0 = young, 10-29; 1 = old, 40-59); bias: gender (0 = female, 1 = male); aligned
= young women and old men. Layout (file names ``<idx>_<label>_<bias>.png``)::

    bffhq/{0.5pct,1pct,2pct,5pct}/{align,conflict}/<label>/*.png    training, per ratio
    bffhq/valid/*.png                                                 shared validation
    bffhq/test/*.png                                                  shared test

As in the official loaders, the test split keeps only bias-conflicting images (label != bias);
valid is used as published. DisEnt ships only 0.5pct, BiasEnsemble all four; ratios missing from
the folder give a clear error when asked for. Images are decoded once at 224 x 224 (the
official ``Resize((224, 224))``); training adds RandomCrop(224, padding=4) + flip and the
official CIFAR normalisation (DisEnt/BE use CIFAR-10 mean/std on BFFHQ).

The data is distributed only through a file-hosting link, so it is looked for at
``<raw root>/bffhq``; ``write_fixture`` makes a small synthetic stand-in in the same layout
(pipeline tests only: its images are noise with a drawn pattern, results on it mean nothing),
which ``bench data fixture bffhq`` places at ``<data root>/fixtures/bffhq``, the second place
looked at.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from PIL import Image

from debias_bench.data.download import Download, DriveFile
from debias_bench.data.family import PresetValues, fixture_root
from debias_bench.data.split_store import ratio_dirname
from debias_bench.errors import DataNotFoundError
from debias_bench.registry import register_dataset

from .cached import SMALL_16PX, CachedImageFamily, photo_spec
from .folder_layout import (
    read_records,
    require_dir,
    scan_class_folders,
    scan_flat_or_nested,
)

if TYPE_CHECKING:  # annotations only (torch): a dataset registers without torch
    from debias_bench.data.contract import Splits

#: The Google Drive folder DisEnt's README publishes (its archives are zips: bffhq, cmnist, ...)
DRIVE_FOLDER = "https://drive.google.com/drive/folders/1JEOqxrhU_IhkdcRohdbuEtFETUxfNmNT"
REMOTE = Download(
    target=".",
    files=(DriveFile(DRIVE_FOLDER, stem="bffhq"),),
    present=("bffhq/test", "bffhq/valid"),
    note="BFFHQ from the Google Drive folder of the DisEnt README (via gdown); no checksum is "
    "published for it, so the unpacked layout is checked instead",
)
HOW_TO_GET = (
    "run `bench data download bffhq` (needs gdown), or download the bffhq archive from the "
    "DisEnt README's Google Drive folder and unpack it so that <raw root>/bffhq/0.5pct exists; "
    "for a pipeline test without the data run `bench data fixture bffhq` (synthetic images in "
    "the same layout)"
)


@register_dataset(
    "bffhq",
    display_name="Biased FFHQ",
    citation="Lee et al., Learning Debiased Representation via Disentangled Feature "
    "Augmentation, NeurIPS 2021 (BFFHQ release; images from Karras et al., FFHQ)",
    kind="real",
)
class BiasedFFHQ(CachedImageFamily):
    spec = photo_spec("bffhq", ("young", "old"), ("female", "male"), ratios=(0.5, 1.0, 2.0, 5.0))
    build_version = "1"
    source_kinds = ("release", "fixture")
    reads_fixture_root = True
    presets: ClassVar[Mapping[str, PresetValues]] = {
        # a read-only published folder (no small build): a seeded subset of the train split
        "smoke": PresetValues({**SMALL_16PX, "train_limit": 1000}),
        "ci": PresetValues({**SMALL_16PX, "train_limit": 1000}),
    }
    # 19,104 aligned + 96 conflicting in DisEnt's 0.5pct release; the other ratios add
    # round(19,104 r / (100 - r)) conflicting [derived: BiasEnsemble's counts not verified]
    train_sizes: ClassVar[Mapping[float, int]] = {
        0.5: 19_200,
        1.0: 19_297,
        2.0: 19_494,
        5.0: 20_109,
    }
    valid_split = "the release's valid folder, as published"

    def remote(self) -> Download:
        return REMOTE

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """The synthetic stand-in (``write_fixture`` below) at ``<raw root>/bffhq``."""
        write_fixture(self.raw_root / "bffhq", aligned_per_class=per_class or 5)
        return {}

    def candidates(self) -> list[Path]:
        return [self.raw_root / "bffhq", fixture_root(self.data_root) / self.spec.name]

    def find_source(self) -> Path:
        for folder in self.candidates():
            if (folder / "test").is_dir():
                return folder
        where = "\n    ".join(str(p) for p in self.candidates())
        raise DataNotFoundError(
            f"BFFHQ not found; looked for a published bffhq/ folder at:\n    {where}",
            hint=HOW_TO_GET,
        )

    def source_kind(self) -> str:
        source = self.find_source()
        return "fixture" if source == self.candidates()[1] else "release"

    def build(self, staging: Path) -> None:
        source = self.find_source()
        if self.source_kind() == "fixture":
            print(f"warning: BFFHQ is read from the synthetic fixture {source}", file=sys.stderr)
        size, c = self.spec.image_size, self.spec.num_classes
        found = 0
        for ratio in self.spec.ratios:
            pct = source / ratio_dirname(ratio)
            if not pct.is_dir():
                continue
            found += 1
            recs = []
            for part in ("align", "conflict"):
                recs += scan_class_folders(pct / part, c, f"BFFHQ {ratio:g}% training ({part})")
            out = staging / ratio_dirname(ratio) / "train"
            out.mkdir(parents=True)
            read_records(recs, size, f"{self.spec.name} {ratio:g}% train", out)
        if not found:
            raise DataNotFoundError(
                f"{source} has none of the ratio folders "
                + ", ".join(ratio_dirname(r) for r in self.spec.ratios),
                hint=HOW_TO_GET,
            )
        valid = scan_flat_or_nested(source / "valid", c, "BFFHQ validation")
        (staging / "valid").mkdir()
        read_records(valid, size, f"{self.spec.name} valid", staging / "valid")
        test = [
            r for r in scan_flat_or_nested(source / "test", c, "BFFHQ test") if r.label != r.bias
        ]
        (staging / "test").mkdir()
        read_records(test, size, f"{self.spec.name} test (conflicting)", staging / "test")

    def load(self, ratio: float) -> Splits:
        ratio = self.check_ratio(ratio)
        self.ready_to_read(ratio)
        self.prepare([ratio])
        if not (self.folder / ratio_dirname(ratio) / "train").is_dir():
            present = sorted(p.name for p in self.folder.glob("*pct"))
            raise DataNotFoundError(
                f"BFFHQ at {self.find_source()} has no {ratio_dirname(ratio)} folder; ratios "
                f"present: {', '.join(present) or 'none'}",
                hint="DisEnt's release has only 0.5pct; BiasEnsemble's has all four",
            )
        return super().load(ratio)


def _fixture_image(label: int, bias: int, rng: np.random.Generator, size: int) -> np.ndarray:
    """Noise with a class pattern (a bright band) and a bias cue (a colour cast)."""
    img = rng.integers(0, 120, (size, size, 3)).astype(np.int16)
    band = slice(size // 4, size // 2) if label == 0 else slice(size // 2, 3 * size // 4)
    img[band, :, :] += 100
    img[..., 0 if bias == 0 else 2] += 35
    return np.clip(img, 0, 255).astype(np.uint8)


def write_fixture(
    root: Path,
    aligned_per_class: int = 20,
    eval_per_group: int = 3,
    size: int = 32,
    ratios: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0),
    seed: int = 0,
) -> Path:
    """A small synthetic BFFHQ in the published layout; returns ``root`` (the bffhq folder).

    Per ratio: ``aligned_per_class`` aligned images per class and
    ``max(1, round(aligned * r / (100 - r)))`` conflicting ones; valid and test hold
    ``eval_per_group`` images of every (label, bias) pair (test filtering drops the aligned)."""
    rng = np.random.default_rng(seed)
    idx = 0

    def save(folder: Path, label: int, bias: int) -> None:
        nonlocal idx
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(_fixture_image(label, bias, rng, size)).save(
            folder / f"{idx}_{label}_{bias}.png"
        )
        idx += 1

    for ratio in ratios:
        pct = root / ratio_dirname(ratio)
        n_conflict = max(1, round(aligned_per_class * ratio / (100 - ratio)))
        for label in (0, 1):
            for _ in range(aligned_per_class):
                save(pct / "align" / str(label), label, label)
            for _ in range(n_conflict):
                save(pct / "conflict" / str(label), label, 1 - label)
    for split in ("valid", "test"):
        for label in (0, 1):
            for bias in (0, 1):
                for _ in range(eval_per_group):
                    save(root / split, label, bias)
    require_dir(root / "test", "fixture")
    return root
