"""CelebA (Liu et al., ICCV 2015) as a spurious-correlation set: a face attribute to predict
against another that goes with it, by default Blond_Hair against Male (Sagawa et al. 2020).

Read from torchvision's layout under ``<raw root>/celeba/``::

    img_align_celeba/000001.jpg ...      the aligned 178 x 218 images
    list_attr_celeba.txt                 a count line, the 40 attribute names, then one line per
                                         image: its file and 40 values of 1 or -1
    list_eval_partition.txt              one line per image: its file and 0 / 1 / 2

The official partition is used as published (162,770 / 19,867 / 19,962 images). Target:
``target`` (class 1 = the attribute is present); bias: ``bias``. With two biases a sample is
bias-aligned when ``bias == label``, so the bias attribute is coded by ``bias_coding``:

* ``flipped`` (the default): bias 0 = the attribute present, 1 = absent. Aligned: not-blond
  men and blond women; conflicting: not-blond women and blond men (the rarest group: 1,387
  of the 162,770 training images). For targets that go with the *absence* of the bias
  attribute (Blond_Hair, Heavy_Makeup, Wearing_Lipstick against Male).
* ``value``: bias = the attribute's value (0 absent, 1 present), for targets that go with its
  presence (Bald, Mustache, Goatee against Male).

Under the default the training split is 44.9 % bias-conflicting (71,629 not-blond women and
1,387 blond men of 162,770: Sagawa et al. 2020, Appendix C.1), the one ratio it runs at; for
another pair the build prints the pair's own share, which the run's ratio does not name.
Worst-group accuracy does not depend on the coding; the aligned and conflicting columns do.

Images are decoded once as GroupDRO's ``get_transform_celebA`` frames them without
augmentation (``CenterCrop(178)`` then ``Resize(224)``), with ImageNet normalisation; the
default backbone is the ImageNet-pretrained ResNet-50 of GroupDRO, JTT and DFR. A full build
is 162,770 + 39,829 images of 224 x 224 x 3 bytes: about 30 GB in the data root.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from debias_bench.data.download import Download, RemoteFile
from debias_bench.data.family import PresetValues, fixture_root
from debias_bench.data.options import DataOption
from debias_bench.errors import ConfigError, CorruptDataError
from debias_bench.registry import register_dataset

from .cached import SMALL_16PX
from .metadata_family import SPLITS, Framing, MetadataFamily, Row, subpop_spec

IMAGES = "img_align_celeba"
ATTRS = "list_attr_celeba.txt"
PARTITION = "list_eval_partition.txt"
#: the 40 attributes of list_attr_celeba.txt, in its order
ATTRIBUTES = (
    "5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Bags_Under_Eyes", "Bald", "Bangs",
    "Big_Lips", "Big_Nose", "Black_Hair", "Blond_Hair", "Blurry", "Brown_Hair",
    "Bushy_Eyebrows", "Chubby", "Double_Chin", "Eyeglasses", "Goatee", "Gray_Hair",
    "Heavy_Makeup", "High_Cheekbones", "Male", "Mouth_Slightly_Open", "Mustache",
    "Narrow_Eyes", "No_Beard", "Oval_Face", "Pale_Skin", "Pointy_Nose", "Receding_Hairline",
    "Rosy_Cheeks", "Sideburns", "Smiling", "Straight_Hair", "Wavy_Hair", "Wearing_Earrings",
    "Wearing_Hat", "Wearing_Lipstick", "Wearing_Necklace", "Wearing_Necktie", "Young",
)  # fmt: skip
SMALL_BUILD: dict[str, Any] = {"limit_per_group": 40}
#: the files of the authors' Google Drive folder that torchvision's CelebA downloads, by its
#: file ids, with the MD5s torchvision pins (torchvision/datasets/celeba.py, ``file_list``);
#: no SHA-256 is published for them [unverified], so the MD5 is what is checked
DRIVE = "https://drive.google.com/uc?export=download&confirm=t&id={}"
FILES = (
    RemoteFile(
        f"{IMAGES}.zip",
        (DRIVE.format("0B7EVK8r0v71pZjFTYXZWM3FlRnM"),),
        md5="00d2c5bc6d35e252742224ab0c1e8fcb",
        unpack=True,
    ),
    RemoteFile(
        ATTRS,
        (DRIVE.format("0B7EVK8r0v71pblRyaVFSWGxPY0U"),),
        md5="75e246fa4810816ffd6ee81facbd244c",
    ),
    RemoteFile(
        PARTITION,
        (DRIVE.format("0B7EVK8r0v71pY0NSMzRuSXJEVkk"),),
        md5="d32c9cbf5e040fd4025c592c306e6668",
    ),
)
REMOTE = Download(
    target="celeba",
    files=FILES,
    present=(f"celeba/{IMAGES}", f"celeba/{ATTRS}", f"celeba/{PARTITION}"),
    note="CelebA: the three files torchvision's CelebA reads, from the authors' Google Drive "
    "(1.4 GB; MD5s as torchvision pins them)",
)


def names_of(target: str, bias: str, coding: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """(class names, bias names) of a pair under a coding."""
    classes = (f"not {target}", target)
    present, absent = bias, f"not {bias}"
    return classes, ((present, absent) if coding == "flipped" else (absent, present))


_CLASSES, _BIASES = names_of("Blond_Hair", "Male", "flipped")


@register_dataset(
    "celeba",
    display_name="CelebA",
    citation="Liu et al., Deep Learning Face Attributes in the Wild, ICCV 2015; Blond_Hair "
    "against Male as in Sagawa et al., ICLR 2020",
)
class CelebA(MetadataFamily):
    spec = subpop_spec("celeba", _CLASSES, _BIASES, ratio=44.9)
    build_version = "1"
    source_kinds = ("release", "fixture")
    framing = Framing(resize=None, crop_to_size=False)
    listing = PARTITION
    presets: ClassVar[Mapping[str, PresetValues]] = {
        "smoke": PresetValues(SMALL_16PX, SMALL_BUILD),
        "ci": PresetValues(SMALL_16PX, SMALL_BUILD),
    }
    train_sizes: ClassVar[Mapping[float, int]] = {44.9: 162_770}
    valid_split = "the official validation partition (list_eval_partition.txt: 1), as published"

    target = DataOption(
        str, "Blond_Hair", "the attribute predicted (class 1: present)", choices=ATTRIBUTES
    )
    bias = DataOption(str, "Male", "the bias attribute", choices=ATTRIBUTES)
    bias_coding = DataOption(
        str,
        "flipped",
        "flipped: bias 0 = the bias attribute present (aligned: not-target with it, target "
        "without it, as Blond_Hair against Male); value: bias = its value",
        choices=("flipped", "value"),
    )

    def __init__(self, raw_root: Path, data_root: Path, **options: Any) -> None:
        super().__init__(raw_root, data_root, **options)
        if self.target == self.bias:
            raise ConfigError(
                f"celeba: target and bias are both {self.target}",
                hint="pick two attributes, e.g. --data-option target=Blond_Hair "
                "--data-option bias=Male",
            )
        classes, biases = names_of(str(self.target), str(self.bias), str(self.bias_coding))
        self.spec = dataclasses.replace(self.spec, class_names=classes, bias_names=biases)

    @property
    def how_to_get(self) -> str:
        return (
            "run `bench data download celeba`, or put torchvision's CelebA files "
            f"({IMAGES}/ unpacked from {IMAGES}.zip, {ATTRS}, {PARTITION}) into "
            "<raw root>/celeba/; for a pipeline test without the data run `bench data fixture "
            "celeba`"
        )

    def remote(self) -> Download:
        return REMOTE

    def candidates(self) -> list[tuple[str, Path]]:
        return [
            ("release", self.raw_root / "celeba"),
            ("fixture", fixture_root(self.data_root) / "celeba"),
        ]

    def found(self, folder: Path) -> bool:
        return (folder / PARTITION).is_file()

    def rows(self) -> list[Row]:
        return read_release(
            self.find_source(), str(self.target), str(self.bias), str(self.bias_coding)
        )

    def tag_suffix(self) -> str:
        pair = (
            ""
            if (self.target, self.bias) == ("Blond_Hair", "Male")
            else (f"-{self.target}-{self.bias}")
        )
        coding = "" if self.bias_coding == "flipped" else f"-{self.bias_coding}"
        return pair + coding + super().tag_suffix()

    def params(self) -> dict[str, Any]:
        return {
            **super().params(),
            "target": self.target,
            "bias": self.bias,
            "bias_coding": self.bias_coding,
        }

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """A tiny release in torchvision's layout at ``<raw root>/celeba/``."""
        write_release(self.raw_root / "celeba", scale=per_class or 1)
        return {}


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise CorruptDataError(
            f"{path} is missing",
            hint=f"torchvision's CelebA layout has {IMAGES}/, {ATTRS} and {PARTITION}",
        )
    return path.read_text().splitlines()


def read_partition(folder: Path) -> dict[str, str]:
    """file -> official split, from list_eval_partition.txt."""
    path = folder / PARTITION
    out = {}
    for line_no, line in enumerate(_lines(path), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or parts[1] not in ("0", "1", "2"):
            raise CorruptDataError(f"{path} line {line_no}: expected '<file> 0|1|2', got {line!r}")
        out[parts[0]] = SPLITS[int(parts[1])]
    return out


def read_attributes(folder: Path, wanted: Sequence[str]) -> dict[str, list[int]]:
    """file -> the 0/1 values of the ``wanted`` attributes, from list_attr_celeba.txt."""
    path = folder / ATTRS
    lines = _lines(path)
    if len(lines) < 2:
        raise CorruptDataError(f"{path}: no attribute names line")
    names = lines[1].split()
    absent = [w for w in wanted if w not in names]
    if absent:
        raise CorruptDataError(f"{path}: no attribute {', '.join(absent)} among {len(names)}")
    columns = [names.index(w) + 1 for w in wanted]
    out = {}
    for line_no, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != len(names) + 1:
            raise CorruptDataError(
                f"{path} line {line_no}: {len(parts) - 1} values for {len(names)} attributes"
            )
        values = [parts[c] for c in columns]
        if any(v not in ("1", "-1") for v in values):
            raise CorruptDataError(f"{path} line {line_no}: attribute values are 1 or -1")
        out[parts[0]] = [int(v == "1") for v in values]
    return out


def read_release(folder: Path, target: str, bias: str, coding: str) -> list[Row]:
    """Every image of the partition, in its order, with its class and coded bias."""
    split_of = read_partition(folder)
    values = read_attributes(folder, (target, bias))
    unlabelled = [f for f in split_of if f not in values]
    if unlabelled:
        raise CorruptDataError(
            f"{folder / PARTITION} lists {len(unlabelled)} images that {ATTRS} has no line for "
            f"(first: {unlabelled[0]})",
            hint="the two files come from different releases; download them again",
        )
    rows = []
    for name, split in split_of.items():
        label, present = values[name]
        coded = 1 - present if coding == "flipped" else present
        rows.append(Row(folder / IMAGES / name, label, coded, split))
    if not rows:
        raise CorruptDataError(f"{folder / PARTITION} lists no images")
    return rows


#: the fixture's images per split and (Blond_Hair, Male) value: the release's shape (few blond
#: men, many not-blond faces of both) at a few dozen images
FIXTURE_COUNTS = {
    "train": ((14, 13), (8, 2)),  # [not blond: (female, male)], [blond: (female, male)]
    "valid": ((4, 4), (4, 2)),
    "test": ((4, 4), (4, 2)),
}


def _fixture_image(blond: int, male: int, rng: np.random.Generator) -> Image.Image:
    """A 22 x 27 noise image (the release's 178 x 218 aspect): a bright 'hair' band when blond,
    a colour cast by the bias attribute."""
    img = rng.integers(0, 110, (27, 22, 3)).astype(np.int16)
    if blond:
        img[5:12, 3:19] += 130
    img[..., 2 if male else 0] += 50
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def write_release(
    root: Path,
    counts: Mapping[str, Sequence[Sequence[int]]] = FIXTURE_COUNTS,
    scale: int = 1,
    seed: int = 0,
) -> Path:
    """A synthetic CelebA in torchvision's layout at ``root``: JPEGs in img_align_celeba/,
    list_attr_celeba.txt (40 attributes, 1 / -1; Blond_Hair and Male as ``counts[split]
    [blond][male] * scale`` says, the others drawn) and list_eval_partition.txt, numbered split
    after split as in the release, groups shuffled within a split (pipeline tests only)."""
    rng = np.random.default_rng(seed)
    (root / IMAGES).mkdir(parents=True, exist_ok=True)
    items = [
        (split_no, blond, male)
        for split_no, split in enumerate(SPLITS)
        for blond, by_male in enumerate(counts[split])
        for male, n in enumerate(by_male)
        for _ in range(n * scale)
    ]
    shuffled = rng.permutation(len(items))
    order = [k for split_no in range(3) for k in shuffled if items[k][0] == split_no]
    attr_lines = [str(len(items)), " ".join(ATTRIBUTES)]
    part_lines = []
    blond_at, male_at = ATTRIBUTES.index("Blond_Hair"), ATTRIBUTES.index("Male")
    for number, k in enumerate(order, start=1):
        split_no, blond, male = items[k]
        name = f"{number:06d}.jpg"
        _fixture_image(blond, male, rng).save(root / IMAGES / name, quality=90)
        values = rng.choice([-1, 1], size=len(ATTRIBUTES))
        values[blond_at], values[male_at] = 2 * blond - 1, 2 * male - 1
        attr_lines.append(f"{name} " + " ".join(f"{v:2d}" for v in values))
        part_lines.append(f"{name} {split_no}")
    (root / ATTRS).write_text("\n".join(attr_lines) + "\n")
    (root / PARTITION).write_text("\n".join(part_lines) + "\n")
    return root
