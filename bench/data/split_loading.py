"""Reading prepared splits of the npy store (``debias_bench.data.split_store``) as torch
splits: one ``Split`` (``load_split``) or a ratio's ``Splits`` (``load_splits``).

The one part of the store that needs torch, kept apart so that writing and checking the store
(what a dataset build does) does not import it; ``DatasetFamily.load`` imports it when data is
loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from debias_bench.data.contract import Split, Splits
from debias_bench.errors import CorruptDataError


def load_split(folder: Path, name: str, mmap: bool = False) -> Split:
    """Read one split; ``mmap`` keeps the images on disk (for the 224-px sets)."""
    paths = [folder / "images.npy", folder / "attrs.npy"]
    for path in paths:
        if not path.is_file():
            raise CorruptDataError(
                f"prepared split is incomplete: {path} is missing",
                hint="delete the folder and run `bench data prepare` again",
            )
    try:
        images = np.load(paths[0], mmap_mode="r" if mmap else None)
        attrs = np.load(paths[1])
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptDataError(
            f"cannot read {paths[0].parent}: {exc}",
            hint="delete the folder and run `bench data prepare` again",
        ) from exc
    if images.dtype != np.uint8 or images.ndim != 4 or attrs.ndim != 2 or attrs.shape[1] < 2:
        raise CorruptDataError(
            f"{folder}: expected uint8 images N x H x W x C and attrs N x 2, got "
            f"{images.dtype} {images.shape} and {attrs.shape}"
        )
    return Split(
        images=images if mmap else torch.from_numpy(images),
        labels=torch.from_numpy(attrs[:, 0].astype(np.int64)),
        biases=torch.from_numpy(attrs[:, 1].astype(np.int64)),
        name=name,
    )


def load_splits(dirs: Mapping[str, Path], mmap: bool = False) -> Splits:
    """The train, valid and test splits from their folders (``dirs``: name -> folder)."""
    return Splits(**{name: load_split(folder, name, mmap=mmap) for name, folder in dirs.items()})
