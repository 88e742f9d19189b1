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

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from debias_bench.data import DatasetSpec, Split, Splits
from debias_bench.family import (
    DatasetFamily,
    load_split,
    publish_dataset,
    ratio_dirname,
    save_split,
)
from debias_bench.progress import progress_bar
from debias_bench.registry import register_dataset

from . import mnist_raw
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

# Independent random streams of one build, so changing one never shifts another.
_STREAM_VALID, _STREAM_TRAIN_BIAS, _STREAM_TEST_BIAS, _STREAM_COLOUR = 1, 2, 3, 4


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


def _rng(data_seed: int, stream: int, ratio: float = 0.0) -> np.random.Generator:
    return np.random.default_rng([data_seed, stream, round(ratio * 1000)])


@register_dataset(
    "cmnist",
    display_name="Colored MNIST",
    citation="Nam et al., Learning from Failure, NeurIPS 2020 (LfF protocol)",
    kind="synthetic",
)
class ColoredMNIST(DatasetFamily):
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
    build_version = "1"

    def __init__(
        self,
        raw_root: Path,
        data_root: Path,
        severity: int = 4,
        data_seed: int = 0,
        valid_size: int = 6000,
        **options: Any,
    ) -> None:
        super().__init__(raw_root, data_root, **options)
        if severity not in range(1, 6):
            raise ValueError(f"cmnist severity must be 1..5, got {severity}")
        self.severity, self.data_seed, self.valid_size = severity, data_seed, valid_size

    @property
    def folder(self) -> Path:
        tag = f"severity{self.severity}-seed{self.data_seed}-valid{self.valid_size}"
        return self.data_root / "cmnist" / f"v{self.build_version}" / tag

    def version(self) -> str:
        return f"{super().version()}/{self.folder.name}"

    def params(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "data_seed": self.data_seed,
            "valid_size": self.valid_size,
            "build_version": self.build_version,
        }

    def prepare(self, ratios: Iterable[float] | None = None) -> Path:
        """Build every ratio at once (about two seconds each); a no-op when already built."""
        wanted = [self.check_ratio(r) for r in (ratios or self.spec.ratios)]
        if all((self.folder / ratio_dirname(r) / "train").is_dir() for r in wanted):
            return self.folder
        mnist = mnist_raw.load_mnist(self.raw_root, self.data_root / "downloads" / "mnist")
        staging = self.folder.with_name(self.folder.name + ".building")
        staging.mkdir(parents=True, exist_ok=True)
        ratios_all = self.spec.ratios  # build all: the held-out valid/test are shared
        steps = progress_bar(total=len(ratios_all) + 2, desc="building cmnist", unit="split")
        train_x, train_y, valid_x, valid_y = self._split_train(mnist)
        for name, images, labels, stream in (
            ("valid", valid_x, valid_y, _STREAM_VALID),
            ("test", mnist["test_images"], mnist["test_labels"], _STREAM_TEST_BIAS),
        ):
            biases = assign_uniform(labels, 10, _rng(self.data_seed, stream))
            self._write(staging / name, images, labels, biases, _rng(self.data_seed, 10 + stream))
            steps.update()
        for ratio in ratios_all:
            biases = assign_skewed(
                train_y, ratio, 10, _rng(self.data_seed, _STREAM_TRAIN_BIAS, ratio)
            )
            colour_rng = _rng(self.data_seed, _STREAM_COLOUR, ratio)
            self._write(
                staging / ratio_dirname(ratio) / "train", train_x, train_y, biases, colour_rng
            )
            steps.update()
        steps.close()
        publish_dataset(staging, self.folder, self.params())
        return self.folder

    def _split_train(self, mnist: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        order = _rng(self.data_seed, _STREAM_VALID + 100).permutation(len(mnist["train_labels"]))
        valid_rows, train_rows = (
            np.sort(order[: self.valid_size]),
            np.sort(order[self.valid_size :]),
        )
        x, y = mnist["train_images"], mnist["train_labels"].astype(np.int64)
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
        split = Split(
            torch.from_numpy(images),
            torch.from_numpy(labels.astype(np.int64)),
            torch.from_numpy(biases),
        )
        save_split(folder, split)

    def load(self, ratio: float) -> Splits:
        ratio = self.check_ratio(ratio)
        if self.options.get("source") in ("imported", "lff"):  # LfF npy / DisEnt PNG data
            from .lff_npy import load_imported

            return load_imported(self, ratio)
        self.prepare([ratio])
        return Splits(
            train=load_split(self.folder / ratio_dirname(ratio) / "train", "train"),
            valid=load_split(self.folder / "valid", "valid"),
            test=load_split(self.folder / "test", "test"),
        )
