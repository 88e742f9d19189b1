"""Colored MNIST, built from the raw MNIST idx files by the LfF protocol.

* Colours: the ten mean colours of LfF's ``colors.th``; each image gets
  ``clamp(mean_color[b] + N(0, I_3) * std, 0, 1)`` with ``std`` by severity
  (0.05, 0.02, 0.01, 0.005, 0.002 for severity 1..5; default 4 -> 0.005), multiplied into the
  grey digit (foreground colouring, black background) and truncated to uint8 as LfF does.
* Train: the MNIST training images minus the validation images; in each class a fraction
  ``ratio`` % is bias-conflicting, spread evenly over the nine other colours.
* Valid: ``valid_size`` MNIST *training* images held out (never test images), coloured with the
  bias uniform over the ten colours within each class, like the test set. LfF has no
  validation split (its ``valid`` is the test set); an unbiased held-out split makes the
  ``best_valid`` selection an honest, non-oracle protocol.
* Test: the 10,000 MNIST test images, bias uniform over the ten colours within each class.

Everything depends only on ``data_seed`` (never on the training seed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from debias_bench.data.download import Download, RemoteFile
from debias_bench.data.family import PresetValues
from debias_bench.data.options import DataOption
from debias_bench.data.progress import progress_bar
from debias_bench.data.spec import DatasetSpec, SplitArrays
from debias_bench.data.split_store import ratio_dirname, save_split
from debias_bench.registry import register_dataset
from debias_bench.streams import rng as stream_rng

from . import mnist_raw
from .lff_npy import ImportableFamily
from .mnist_raw import IdxSource
from .skew import assign_skewed, assign_uniform

MEAN_COLORS = np.array(
    [
        [0.9837, 0.3125, 0.1686],
        [0.9905, 0.9156, 0.3515],
        [0.6730, 0.4611, 0.5798],
        [0.7833, 0.8316, 0.6013],
        [0.0880, 0.7780, 0.9818],
        [0.3214, 0.9611, 0.4464],
        [0.0246, 0.2357, 0.7587],
        [0.5552, 0.1016, 0.7618],
        [0.2077, 0.3929, 0.0187],
        [0.8337, 0.2024, 0.2669],
    ],
    dtype=np.float32,
)
SEVERITY_STD = (0.05, 0.02, 0.01, 0.005, 0.002)


def colorize(
    digits: np.ndarray, biases: np.ndarray, severity: int, rng: np.random.Generator
) -> np.ndarray:
    """Grey ``N x 28 x 28`` uint8 digits -> coloured ``N x 28 x 28 x 3`` uint8 images."""
    std = SEVERITY_STD[severity - 1]
    noise = rng.standard_normal((len(digits), 3)).astype(np.float32)
    colours = np.clip(MEAN_COLORS[biases] + noise * std, 0.0, 1.0)
    out = np.empty((*digits.shape, 3), dtype=np.uint8)
    for start in range(0, len(digits), 8192):  # chunks keep the float temporary small
        part = slice(start, start + 8192)
        coloured = digits[part, :, :, None].astype(np.float32) * colours[part, None, None, :]
        out[part] = coloured.astype(np.uint8)  # truncation, as LfF's np.uint8 cast
    return out


def _milli(ratio: float) -> int:
    """A ratio in thousandths of a percent, the index of a per-ratio random stream."""
    return round(ratio * 1000)


class ColourBiasedDigits(ImportableFamily):
    """Colour-biased images built from an idx-format source by the LfF protocol.

    ``raw_source`` says which idx files, where under the raw root and how to fetch them; a
    colour-biased variant of another idx dataset is a subclass that names its own source and
    spec (the data folder, build lock, manifest and progress text follow its registered name)::

        @register_dataset("cfashion", display_name="Colored Fashion-MNIST", kind="synthetic")
        class ColoredFashion(ColourBiasedDigits):
            raw_source = IdxSource("Fashion-MNIST", folders=("fashion",), mirrors=(...))
            spec = dataclasses.replace(ColoredMNIST.spec, name="cfashion")
            train_sizes = dict.fromkeys(spec.ratios, 54_000)  # its own: never a recipe's
    """

    raw_source: ClassVar[IdxSource] = mnist_raw.MNIST
    build_version = "1"
    valid_split = (
        "training images held out as valid (option valid_size), colour uniform within each "
        "class (unbiased)"
    )

    severity = DataOption(
        int, 4, "colour noise level (LfF): std 0.05, 0.02, 0.01, 0.005, 0.002", choices=range(1, 6)
    )
    valid_size = DataOption(
        int, 6000, "training images held out as the unbiased valid split (at most 10 %)", minimum=1
    )

    @property
    def folder(self) -> Path:
        tag = f"severity{self.severity}-seed{self.data_seed}-valid{self.valid_size}"
        return self.data_root / self.spec.name / f"v{self.build_version}" / tag

    def version(self) -> str:
        return f"{super().version()}/{self.folder.name}"

    def params(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "data_seed": self.data_seed,
            "valid_size": self.valid_size,
            "build_version": self.build_version,
        }

    @property
    def download_dir(self) -> Path:
        return self.data_root / "downloads" / self.raw_source.key

    def find_raw(self) -> dict[str, Path]:
        found = mnist_raw.find(self.raw_source, self.raw_root, self.download_dir)
        if found is None:
            raise mnist_raw.not_found(
                self.raw_source, self.raw_root, self.download_dir, "not downloaded", self.spec.name
            )
        return found

    @property
    def auto_download(self) -> bool:
        return bool(self.raw_source.mirrors) and not self.imported

    def remote(self) -> Download | None:
        """The idx files from the source's mirrors, into ``<raw root>/<its first folder>``."""
        src = self.raw_source
        if not src.mirrors:
            return None
        names = [f"{stem}.gz" for stem in src.files.values()]
        files = tuple(
            RemoteFile(n, tuple(m + n for m in src.mirrors), md5=src.gz_md5.get(n)) for n in names
        )
        present = tuple(f"{src.folders[0]}/{n}" for n in names)
        return Download(src.folders[0], files, present)

    def prepare(self, ratios: Iterable[float] | None = None, force: bool = False) -> Path:
        """Build every ratio at once (about two seconds each); a no-op when already built."""
        for r in ratios or self.spec.ratios:
            self.check_ratio(r)
        if self.imported:
            return self.data_root / self.spec.name / "lff-import"  # `bench data import` fills it
        return self.build_into(self.folder, force, self._build, self.params)

    def _build(self, staging: Path) -> None:
        """Every ratio's training split and the shared valid and test splits, into ``staging``."""
        raw = mnist_raw.load_idx(self.raw_source, self.raw_root, self.download_dir, self.spec.name)
        ratios_all = self.spec.ratios  # build all: the held-out valid/test are shared
        steps = progress_bar(
            total=len(ratios_all) + 2, desc=f"building {self.spec.name}", unit="split"
        )
        nb = self.spec.num_biases
        train_x, train_y, valid_x, valid_y = self._split_train(raw)
        # independent named streams of data_seed (debias_bench.streams), so changing one never
        # shifts another
        for name, images, labels in (
            ("valid", valid_x, valid_y),
            ("test", raw["test_images"], raw["test_labels"]),
        ):
            biases = assign_uniform(labels, nb, stream_rng(self.data_seed, f"cmnist.{name}_bias"))
            colours = stream_rng(self.data_seed, f"cmnist.{name}_colour")
            self._write(staging / name, images, labels, biases, colours)
            steps.update()
        for ratio in ratios_all:
            biases = assign_skewed(
                train_y, ratio, nb, stream_rng(self.data_seed, "cmnist.train_bias", _milli(ratio))
            )
            colour_rng = stream_rng(self.data_seed, "cmnist.train_colour", _milli(ratio))
            self._write(
                staging / ratio_dirname(ratio) / "train", train_x, train_y, biases, colour_rng
            )
            steps.update()
        steps.close()

    def _split_train(self, raw: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        n = len(raw["train_labels"])
        n_valid = min(self.valid_size, n // 10)  # 6000 of MNIST's 60000; less on a subset
        order = stream_rng(self.data_seed, "cmnist.valid_split").permutation(n)
        valid_rows, train_rows = np.sort(order[:n_valid]), np.sort(order[n_valid:])
        x, y = raw["train_images"], raw["train_labels"].astype(np.int64)
        return x[train_rows], y[train_rows], x[valid_rows], y[valid_rows]

    def _write(
        self,
        folder: Path,
        digits: np.ndarray,
        labels: np.ndarray,
        biases: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        images = colorize(digits, biases, self.severity, rng)
        save_split(folder, SplitArrays(images, labels.astype(np.int64), biases))

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """Tiny idx files (30 training, 10 test images per class by default) in the raw root."""
        rng = np.random.default_rng(0)
        folder = self.raw_root / self.raw_source.folders[0]
        classes = self.spec.num_classes
        h, w = self.raw_source.image_shape
        n_train = per_class or 30
        for split, n in (("train", n_train), ("test", max(1, n_train // 3))):
            labels = np.repeat(np.arange(classes, dtype=np.uint8), n)
            images = rng.integers(0, 40, (len(labels), h, w)).astype(np.uint8)
            for k, label in enumerate(labels):  # a bright bar whose row says the class
                row = int(label) * (h - 2) // max(1, classes - 1)
                images[k, row : row + 2, 4 : w - 4] = 255
            files = self.raw_source.files
            mnist_raw.write_idx(folder / f"{files[split + '_images']}.gz", images)
            mnist_raw.write_idx(folder / f"{files[split + '_labels']}.gz", labels)
        return {"valid_size": 3 * classes}


@register_dataset(
    "cmnist",
    display_name="Colored MNIST",
    citation="Nam et al., Learning from Failure, NeurIPS 2020 (LfF protocol)",
    kind="synthetic",
)
class ColoredMNIST(ColourBiasedDigits):
    spec = DatasetSpec(
        name="cmnist",
        num_classes=10,
        num_biases=10,
        ratios=(0.5, 1.0, 2.0, 5.0),
        image_size=(28, 28),
        channels=3,
        backbone="mlp",
        test_kind="unbiased",
        class_names=tuple(str(d) for d in range(10)),
        bias_names=tuple(f"colour{b}" for b in range(10)),
    )
    raw_source = mnist_raw.MNIST
    lff_attr_names = ("digit", "color")
    presets: ClassVar[Mapping[str, PresetValues]] = {
        # a fixed subset of 6,000 training images and a longer schedule than the engine's,
        # scored on the whole test set (10,000 images: on the preset's 1,000 the test set alone
        # is a point of noise) every 20 steps (the regression check's learning-curve mean,
        # docs/regression.md); the valid split stays at 1,000 images (DFR trains its last layer
        # on half of it and DeNetDM picks its epoch on it: the whole 6,000 cost them 20-80x)
        "ci": PresetValues(
            {
                "train_limit": 6000,
                "batch_size": 256,
                "steps": 240,
                "eval_every": 20,
                "eval_limit": None,
                "valid_limit": 1000,
            }
        )
    }
    # MNIST's 60,000 training images minus the 6,000 held out as valid
    train_sizes: ClassVar[Mapping[float, int]] = dict.fromkeys(spec.ratios, 54_000)
    valid_split = (
        "6,000 held-out MNIST training images, colour uniform within each class (unbiased)"
    )

    def lff_tag(self, ratio: float) -> str:
        return f"ColoredMNIST-Skewed{ratio / 100:g}-Severity{self.severity}"
