"""A family whose splits a metadata table gives (Waterbirds, CelebA): one row per image, with
its file, its class, its bias attribute and its official split.

Unlike the DisEnt-line sets, these are not built at a bias-conflicting ratio: the release fixes
the training set, its validation and its test split, so a family declares one ratio, the
share of bias-conflicting training images of the release (a name of its composition, also what
the in-distribution validation split is subsampled to), and builds::

    <folder>/<pct>/train/{images,attrs}.npy    the official training split
    <folder>/valid/...                          the official validation split
    <folder>/test/...                           the official test split

Images are decoded once at the spec's size with the framing the official loaders use (a
``Framing``: GroupDRO's ``Resize((256, 256))`` then ``CenterCrop(224)`` on Waterbirds, its
``CenterCrop(178)`` then ``Resize(224)`` on CelebA) and memory-mapped. ``limit_per_group``
keeps the first N images of each (split, class, bias) group in the metadata's order: the small
builds that ``--preset smoke`` and ``--preset ci`` read.
"""

from __future__ import annotations

import sys
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image, UnidentifiedImageError

from debias_bench.data.options import DataOption
from debias_bench.data.progress import progress_bar
from debias_bench.data.spec import DatasetSpec
from debias_bench.data.split_store import ratio_dirname
from debias_bench.errors import CorruptDataError, DataNotFoundError

from .cached import CachedImageFamily
from .parallel import parallel_chunks

#: the official splits, in the order the metadata numbers them (0, 1, 2)
SPLITS = ("train", "valid", "test")
#: ImageNet's normalisation, which GroupDRO, JTT and DFR use with their pretrained ResNet-50
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CHUNK = 256  # images per parallel decoding task


@dataclass(frozen=True)
class Row:
    """One image of the metadata: its file, class, bias and official split."""

    path: Path
    label: int
    bias: int
    split: str


@dataclass(frozen=True)
class Framing:
    """How an image becomes ``size`` pixels. ``resize`` (h, w) first (None: none), then a
    centre crop: to ``size`` when ``crop_to_size``, else to the largest centred square, which
    is then resized to ``size``."""

    resize: tuple[int, int] | None
    crop_to_size: bool

    def describe(self, size: tuple[int, int]) -> str:
        if self.resize is not None:
            return f"Resize({self.resize}) then CenterCrop({size})"
        return f"CenterCrop(shorter side) then Resize({size})"


def frame(img: Image.Image, framing: Framing, size: tuple[int, int]) -> np.ndarray:
    """``img`` (RGB) framed as the official loaders do, as uint8 ``H x W x 3``."""
    if framing.resize is not None:
        img = img.resize((framing.resize[1], framing.resize[0]), Image.Resampling.BILINEAR)
    w, h = img.size
    ch, cw = size if framing.crop_to_size else (min(w, h), min(w, h))
    if ch > h or cw > w:
        raise CorruptDataError(f"an image of {w}x{h} pixels cannot be centre-cropped to {cw}x{ch}")
    left, top = round((w - cw) / 2.0), round((h - ch) / 2.0)  # torchvision's CenterCrop
    img = img.crop((left, top, left + cw, top + ch))
    if img.size != (size[1], size[0]):
        img = img.resize((size[1], size[0]), Image.Resampling.BILINEAR)
    return np.asarray(img, dtype=np.uint8)


def decode_framed(path: Path, framing: Framing, size: tuple[int, int]) -> np.ndarray:
    """One image file, framed; a file that is not an image is named in the error."""
    try:
        with Image.open(path) as opened:
            return frame(opened.convert("RGB"), framing, size)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise CorruptDataError(
            f"cannot decode image {path}: {exc}",
            hint="the file is corrupt or not an image; restore it from the original release",
        ) from exc


def _decode_chunk(paths: Sequence[Path], framing: Framing, size: tuple[int, int]) -> np.ndarray:
    return np.stack([decode_framed(p, framing, size) for p in paths])


def write_split(
    rows: Sequence[Row], framing: Framing, size: tuple[int, int], out: Path, desc: str
) -> None:
    """``out/images.npy`` (uint8, written as decoded, never whole in memory) and
    ``out/attrs.npy`` (int64 ``[label, bias]``) of ``rows``."""
    if not rows:
        raise CorruptDataError(f"split {desc!r} has no images")
    out.mkdir(parents=True, exist_ok=True)
    shape = (len(rows), size[0], size[1], 3)
    images = np.lib.format.open_memmap(out / "images.npy", mode="w+", dtype=np.uint8, shape=shape)
    paths = [r.path for r in rows]
    chunks = [(paths[i : i + CHUNK], framing, size) for i in range(0, len(paths), CHUNK)]
    bar = progress_bar(total=len(paths), desc=f"decoding {desc}", unit="img")
    start = 0
    for block in parallel_chunks(_decode_chunk, chunks, 2):
        images[start : start + len(block)] = block
        start += len(block)
        bar.update(len(block))
    bar.close()
    images.flush()
    del images
    attrs = np.array([[r.label, r.bias] for r in rows], dtype=np.int64)
    np.save(out / "attrs.npy", attrs)


def group_counts(
    rows: Sequence[Row], num_classes: int, num_biases: int
) -> dict[str, list[list[int]]]:
    """Per official split, the (class x bias) image counts of ``rows``."""
    found = Counter((r.split, r.label, r.bias) for r in rows)
    return {
        split: [[found[(split, c, b)] for b in range(num_biases)] for c in range(num_classes)]
        for split in SPLITS
    }


def limited(rows: Sequence[Row], limit: int | None) -> list[Row]:
    """The first ``limit`` rows of each (split, class, bias) group, in the metadata's order."""
    if not limit:
        return list(rows)
    taken: Counter[tuple[str, int, int]] = Counter()
    kept = []
    for row in rows:
        key = (row.split, row.label, row.bias)
        if taken[key] < limit:
            taken[key] += 1
            kept.append(row)
    return kept


def missing_files(rows: Sequence[Row], source: Path, listing: str) -> None:
    """A clear error when images the metadata lists are not on disk (the first few named)."""
    gone = [r.path for r in rows if not r.path.is_file()]
    if gone:
        first = ", ".join(str(p) for p in gone[:3])
        raise CorruptDataError(
            f"{source}: {len(gone)} of the {len(rows)} images {listing} lists are missing "
            f"(first: {first})",
            hint="the release is incompletely unpacked; unpack it again (or download it again "
            "with `bench data download`)",
        )


def subpop_spec(
    name: str,
    class_names: tuple[str, ...],
    bias_names: tuple[str, ...],
    ratio: float,
) -> DatasetSpec:
    """The spec of a subpopulation-shift set as GroupDRO, JTT and DFR train on it: 224-px RGB,
    ImageNet normalisation, an ImageNet-pretrained ResNet-50, no training augmentation (the
    official ``--augment_data`` is off by default), the official test split."""
    return DatasetSpec(
        name=name,
        num_classes=len(class_names),
        num_biases=len(bias_names),
        ratios=(ratio,),
        image_size=(224, 224),
        channels=3,
        backbone="resnet50_pretrained",
        test_kind="official",
        class_names=class_names,
        bias_names=bias_names,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
    )


class MetadataFamily(CachedImageFamily):
    """A cached 224-px family built from a metadata table of official splits."""

    #: how images are framed at decoding (the official loaders' transform)
    framing: ClassVar[Framing]
    #: the metadata file a subclass reads (named in errors)
    listing: ClassVar[str] = "the metadata"

    limit_per_group = DataOption[int | None](
        int,
        None,
        "only the first N images of each (split, class, bias) group, in the metadata's order "
        "(the small builds of --preset smoke and ci)",
        minimum=1,
    )

    @abstractmethod
    def candidates(self) -> list[tuple[str, Path]]:
        """(source kind, folder) in the order they are looked for."""

    @abstractmethod
    def rows(self) -> list[Row]:
        """Every image of the release found by ``find_source``, in the metadata's order."""

    @property
    @abstractmethod
    def how_to_get(self) -> str:
        """The hint of a missing source: what gets the data."""

    def found(self, folder: Path) -> bool:
        """Whether ``folder`` holds a source (its metadata is there)."""
        return folder.is_dir()

    def find_source(self) -> Path:
        for _, folder in self.candidates():
            if self.found(folder):
                return folder
        where = "\n    ".join(str(p) for _, p in self.candidates())
        raise DataNotFoundError(
            f"{self.spec.name}: raw data not found; looked at:\n    {where}", hint=self.how_to_get
        )

    def source_kind(self) -> str:
        source = self.find_source()
        return next(kind for kind, folder in self.candidates() if folder == source)

    def selected_rows(self) -> list[Row]:
        """The rows this build decodes (``limit_per_group`` applied), files checked."""
        rows = limited(self.rows(), self.limit_per_group)
        missing_files(rows, self.find_source(), self.listing)
        return rows

    def build(self, staging: Path) -> None:
        source = self.find_source()
        if self.source_kind() == "fixture":
            print(
                f"warning: {self.spec.name} is read from the synthetic fixture {source}",
                file=sys.stderr,
            )
        rows = self.selected_rows()
        size = self.spec.image_size
        (ratio,) = self.spec.ratios
        folders = {
            "train": staging / ratio_dirname(ratio) / "train",
            "valid": staging / "valid",
            "test": staging / "test",
        }
        for split in SPLITS:
            of_split = [r for r in rows if r.split == split]
            write_split(of_split, self.framing, size, folders[split], f"{self.spec.name} {split}")
        print(self.describe_counts(rows), file=sys.stderr)

    def describe_counts(self, rows: Sequence[Row]) -> str:
        """One line per split: its images and its (class, bias) groups, by name."""
        spec = self.spec
        counts = group_counts(rows, spec.num_classes, spec.num_biases)
        lines = []
        for split in SPLITS:
            groups = ", ".join(
                f"({spec.class_names[c]}, {spec.bias_names[b]}) {n:,}"
                for c, row in enumerate(counts[split])
                for b, n in enumerate(row)
            )
            total = sum(map(sum, counts[split]))
            lines.append(f"{spec.name} {split}: {total:,} images: {groups}")
        train = np.array(counts["train"])
        conflicting = int(train.sum() - np.trace(train)) if train.shape[0] == train.shape[1] else 0
        share = 100.0 * conflicting / max(1, int(train.sum()))
        lines.append(
            f"{spec.name}: {share:.2f} % of the training images are bias-conflicting "
            f"(the ratio it is run at: {spec.ratios[0]:g} %)"
        )
        return "\n".join(lines)

    def params(self) -> dict[str, Any]:
        return {
            **super().params(),
            "limit_per_group": self.limit_per_group,
            "framing": self.framing.describe(self.spec.image_size),
        }

    def tag_suffix(self) -> str:
        return f"-limit{self.limit_per_group}" if self.limit_per_group else ""
