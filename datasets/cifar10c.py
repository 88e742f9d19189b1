"""Corrupted CIFAR-10: each class correlated with one corruption (bias index = class index).

* Corruption sets (option ``corruptions``): ``default`` = Brightness, Contrast, Gaussian Noise,
  Frost, Elastic Transform, Gaussian Blur, Defocus Blur, Impulse Noise, Saturate, Pixelate
  (the set of EnD / DisEnt / SelecMix and the ETF-Debias paper); ``type0`` / ``type1`` = LfF's
  CorruptedCIFAR10-Type0 / Type1. See ``corruptions.py`` for the functions and the documented
  substitutes (frost texture, motion blur).
* ``severity`` is the Hendrycks level 1..5. LfF's dataset tags count from 0: its
  "Severity4" calls level **5** (``severity + 1`` in ``make_dataset.py``), and ETF-Debias's
  code trains on those "Severity4" sets, so the default here is level 5.
* Train: the CIFAR-10 training images minus ``valid_size`` held out; in each class
  ``ratio`` % are bias-conflicting, spread evenly over the nine other corruptions
  (``skew.assign_skewed``). Valid: the held-out training images, corruption uniform within each
  class (LfF has no validation split; its "valid" is the test set). Test: the 10,000 CIFAR-10
  test images, corruption uniform within each class (unbiased: 10 % aligned).
* Each (image, corruption) pair is corrupted once with its own RNG, seeded by
  ``(data_seed, split, image index, corruption)``: the build is deterministic, the same aligned
  image is identical in every ratio, and parallel chunks (joblib, ``n_jobs``) do not change it.
* ``source="imported"`` loads data built by LfF's script or shipped by DisEnt instead
  (``bench data import``, see ``lff_npy.py``).
* Data stay in memory as uint8 N x 32 x 32 x 3; training applies RandomCrop(32, padding=4),
  horizontal flip and the CIFAR normalisation of LfF on tensors. Default backbone: ResNet-20.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from debias_bench.data.download import Download
from debias_bench.data.family import PresetValues
from debias_bench.data.options import DataOption
from debias_bench.data.progress import progress_bar
from debias_bench.data.spec import DatasetSpec, SplitArrays
from debias_bench.data.split_store import ratio_dirname, save_split
from debias_bench.registry import register_dataset
from debias_bench.streams import rng

from . import cifar10_raw
from .cached import CIFAR_MEAN, CIFAR_STD, SMALL_16PX
from .corruptions import CORRUPTION_SETS, corrupt
from .lff_npy import ImportableFamily
from .parallel import parallel_chunks
from .skew import assign_skewed, assign_uniform

CHUNK = 1000


@dataclasses.dataclass(frozen=True)
class Corruption:
    """How one stream of images is corrupted: image ``k`` gets corruption ``names[bias_k]`` at
    ``severity``, its noise drawn from the named stream ``stream`` of ``seed`` at
    ``(id_k, bias_k)`` (the same image with the same bias looks the same in every build,
    whatever the chunking)."""

    names: tuple[str, ...]
    severity: int
    seed: int
    stream: str

    def __call__(self, images: np.ndarray, ids: np.ndarray, biases: np.ndarray) -> np.ndarray:
        out = np.empty_like(images)
        for k in range(len(images)):
            draws = rng(self.seed, self.stream, int(ids[k]), int(biases[k]))
            out[k] = corrupt(self.names[biases[k]], images[k], self.severity, draws)
        return out


def corrupt_many(
    images: np.ndarray,
    ids: np.ndarray,
    biases: np.ndarray,
    corruption: Corruption,
    desc: str = "corrupting",
    n_jobs: int = 2,
) -> np.ndarray:
    """``corruption`` applied to ``images`` in chunks, in parallel, with progress."""
    out = np.empty_like(images)
    starts = range(0, len(images), CHUNK)
    chunks = [(images[s : s + CHUNK], ids[s : s + CHUNK], biases[s : s + CHUNK]) for s in starts]
    bar = progress_bar(total=len(images), desc=desc, unit="img")
    for s, block in zip(starts, parallel_chunks(corruption, chunks, n_jobs), strict=True):
        out[s : s + len(block)] = block
        bar.update(len(block))
    bar.close()
    return out


def _milli(ratio: float) -> int:
    """A ratio in thousandths of a percent, the index of a per-ratio random stream."""
    return round(ratio * 1000)


#: the small build that ``smoke`` and ``ci`` read (one build for both)
SMALL_BUILD: dict[str, Any] = {"limit": 100, "valid_size": 200}


@register_dataset(
    "cifar10c",
    display_name="Corrupted CIFAR-10",
    citation="Hendrycks & Dietterich, ICLR 2019 (corruptions); Nam et al., LfF, NeurIPS 2020 "
    "(protocol)",
    kind="synthetic",
)
class CorruptedCIFAR10(ImportableFamily):
    spec = DatasetSpec(
        name="cifar10c",
        num_classes=10,
        num_biases=10,
        ratios=(0.5, 1.0, 2.0, 5.0),
        image_size=(32, 32),
        channels=3,
        backbone="resnet20",
        test_kind="unbiased",
        class_names=cifar10_raw.CLASSES,
        bias_names=CORRUPTION_SETS["default"],
        mean=CIFAR_MEAN,
        std=CIFAR_STD,
        crop_padding=4,
        hflip=True,
    )
    build_version = "1"
    presets: ClassVar[Mapping[str, PresetValues]] = {
        "smoke": PresetValues(SMALL_16PX, SMALL_BUILD),
        "ci": PresetValues(SMALL_16PX, SMALL_BUILD),
    }
    # CIFAR-10's 50,000 training images minus the 5,000 held out as valid
    train_sizes: ClassVar[Mapping[float, int]] = dict.fromkeys(spec.ratios, 45_000)
    valid_split = (
        "5,000 held-out CIFAR-10 training images, corruption uniform within each class (unbiased)"
    )

    corruptions = DataOption(
        str,
        "default",
        "corruption set: default (EnD/DisEnt/ETF-Debias) or LfF's type0 / type1",
        choices=tuple(CORRUPTION_SETS),
    )
    severity = DataOption(
        int, 5, "Hendrycks level 1..5 (LfF's tag 'Severity4' is level 5)", choices=range(1, 6)
    )
    valid_size = DataOption(
        int, 5000, "training images held out as the unbiased valid split (at most 10 %)", minimum=1
    )
    limit = DataOption[int | None](
        int, None, "only the first N images of each class (quick builds, CI)", minimum=1
    )
    n_jobs = DataOption(
        int, 2, "parallel build workers (no effect on the data)", minimum=1, affects_data=False
    )
    lff_attr_names = ("object", "corruption")

    def __init__(self, raw_root: Path, data_root: Path, **options: Any) -> None:
        super().__init__(raw_root, data_root, **options)
        self.names = CORRUPTION_SETS[self.corruptions]
        self.spec = dataclasses.replace(self.spec, bias_names=self.names)

    def lff_tag(self, ratio: float) -> str:
        kind = {"type0": "Type0", "type1": "Type1"}.get(self.corruptions, "Default")
        level = self.severity - 1  # LfF's tag counts from 0
        return f"CorruptedCIFAR10-{kind}-Skewed{ratio / 100:g}-Severity{level}"

    @property
    def tag(self) -> str:
        tag = f"{self.corruptions}-level{self.severity}-seed{self.data_seed}-valid{self.valid_size}"
        return tag + (f"-limit{self.limit}" if self.limit else "")

    @property
    def folder(self) -> Path:
        return self.data_root / self.spec.name / f"v{self.build_version}" / self.tag

    def version(self) -> str:
        return f"{super().version()}/{self.tag}"

    def params(self) -> dict[str, Any]:
        return {
            "corruptions": list(self.names),
            "corruption_set": self.corruptions,
            "severity_level": self.severity,
            "data_seed": self.data_seed,
            "valid_size": self.valid_size,
            "limit": self.limit,
            "build_version": self.build_version,
        }

    def remote(self) -> Download:
        return cifar10_raw.REMOTE

    def find_raw(self) -> Path:
        return cifar10_raw.find(self.raw_root)

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """Tiny CIFAR-10 batches (4 training and 3 test images per class) under the raw root."""
        n = per_class or 4
        cifar10_raw.write_fixture(self.raw_root, per_class_train=n, per_class_test=3)
        return {"limit": n, "valid_size": 10, "n_jobs": 1}

    def _source(self) -> dict[str, np.ndarray]:
        cache = self.data_root / "downloads" / "cifar10"
        if self.limit:  # the first `limit` images of each class (tests, quick looks)
            if all((cache / f"{k}_labels.npy").is_file() for k in ("train", "test")):
                return cifar10_raw._first_per_class(
                    cifar10_raw.load_cifar10(self.raw_root, cache), self.limit
                )
            return cifar10_raw.load_cifar10(self.raw_root, cache, limit=self.limit)
        return cifar10_raw.load_cifar10(self.raw_root, cache)

    def prepare(self, ratios: Iterable[float] | None = None, force: bool = False) -> Path:
        """Build every ratio at once (shared valid/test; each corrupted pair done once)."""
        for r in ratios or self.spec.ratios:
            self.check_ratio(r)
        if self.imported:
            return self.data_root / self.spec.name / "lff-import"  # `bench data import` fills it
        shape = (self.spec.num_classes, self.spec.num_biases)
        return self.build_into(self.folder, force, self._build, self.params, shape)

    def _corruption(self, split: str) -> Corruption:
        return Corruption(self.names, self.severity, self.data_seed, f"cifar10c.corrupt.{split}")

    def _build(self, staging: Path) -> None:
        """The shared valid and test splits and every ratio's training split, into ``staging``."""
        src = self._source()
        x, y = src["train_images"], src["train_labels"]
        n_valid = min(self.valid_size, len(y) // 10)
        order = rng(self.data_seed, "cifar10c.split").permutation(len(y))
        valid_rows, train_rows = np.sort(order[:n_valid]), np.sort(order[n_valid:])
        self._write(
            staging / "valid",
            x,
            y,
            valid_rows,
            assign_uniform(y[valid_rows], 10, rng(self.data_seed, "cifar10c.valid_bias")),
            "valid",
        )
        self._write(
            staging / "test",
            src["test_images"],
            src["test_labels"],
            np.arange(len(src["test_labels"])),
            assign_uniform(src["test_labels"], 10, rng(self.data_seed, "cifar10c.test_bias")),
            "test",
        )
        # training: corrupt the union of (image, bias) pairs over the ratios once
        per_ratio = {
            r: assign_skewed(
                y[train_rows], r, 10, rng(self.data_seed, "cifar10c.train_bias", _milli(r))
            )
            for r in self.spec.ratios
        }
        pairs = np.unique(
            np.concatenate([np.stack([train_rows, b], 1) for b in per_ratio.values()]), axis=0
        )
        corrupted = corrupt_many(
            x[pairs[:, 0]],
            pairs[:, 0],
            pairs[:, 1],
            self._corruption("train"),
            desc="corrupting train",
            n_jobs=self.n_jobs,
        )
        lookup = {(int(i), int(b)): k for k, (i, b) in enumerate(pairs)}
        for ratio, biases in per_ratio.items():
            rows = np.array(
                [lookup[(int(i), int(b))] for i, b in zip(train_rows, biases, strict=True)]
            )
            split = SplitArrays(
                corrupted[rows], y[train_rows].astype(np.int64), biases.astype(np.int64)
            )
            save_split(staging / ratio_dirname(ratio) / "train", split)

    def _write(
        self,
        folder: Path,
        x: np.ndarray,
        y: np.ndarray,
        rows: np.ndarray,
        biases: np.ndarray,
        name: str,
    ) -> None:
        images = corrupt_many(
            x[rows],
            rows,
            biases,
            self._corruption(name),
            desc=f"corrupting {name}",
            n_jobs=self.n_jobs,
        )
        save_split(folder, SplitArrays(images, y[rows].astype(np.int64), biases.astype(np.int64)))
