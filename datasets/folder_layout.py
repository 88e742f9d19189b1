"""The DisEnt / BiasEnsemble / SelecMix image-folder layout, shared by every family.

Files are named ``<idx>_<label>_<bias>.<ext>``; the official loaders read the label and the
bias from the last two ``_``-separated fields of the file name (``path.split('_')[-2]`` and
``[-1]``), never from the folder, and so do we. Folders group the files::

    <root>/<pct>/align/<label>/*      <root>/<pct>/conflict/<label>/*     (training)
    <root>/<pct>/valid/*              <root>/test/<label>/*  or  <root>/test/*

Which folders a family uses differs (see each family's module); this module scans them into
``(path, label, bias)`` records with clear errors for a missing folder, a missing class
folder, a badly named file or a file that is not an image, and decodes them once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from debias_bench.data.split_store import ratio_dirname
from debias_bench.errors import CorruptDataError, DataNotFoundError

from .images import decode_files

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".webp"}
_NAME = re.compile(r"_(\d+)_(\d+)$")


@dataclass(frozen=True)
class Record:
    path: Path
    label: int
    bias: int


def parse_name(path: Path) -> tuple[int, int]:
    """``.../<idx>_<label>_<bias>.png`` -> (label, bias), as the official loaders parse it."""
    match = _NAME.search(path.stem)
    if not match:
        raise CorruptDataError(
            f"{path}: file name does not end in _<label>_<bias> (expected <idx>_<label>_<bias>"
            f"{path.suffix})"
        )
    return int(match.group(1)), int(match.group(2))


def require_dir(folder: Path, what: str, hint: str | None = None) -> Path:
    if not folder.is_dir():
        raise DataNotFoundError(f"{what}: folder {folder} does not exist", hint=hint)
    return folder


def image_files(folder: Path) -> list[Path]:
    """Image files directly inside ``folder``, sorted by name (a stable order)."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def records(paths: Iterable[Path], num_classes: int) -> list[Record]:
    out = []
    for path in paths:
        label, bias = parse_name(path)
        if not 0 <= label < num_classes:
            raise CorruptDataError(f"{path}: label {label} outside 0..{num_classes - 1}")
        out.append(Record(path, label, bias))
    return out


def scan_class_folders(folder: Path, num_classes: int, what: str) -> list[Record]:
    """``folder/<label>/*`` with one sub-folder per class; a missing class folder is an error.

    Sub-folders named by number must cover ``0..num_classes-1``; otherwise (named by class
    name) there must be exactly ``num_classes`` of them."""
    require_dir(folder, what)
    subdirs = sorted(p for p in folder.iterdir() if p.is_dir())
    numeric = [p for p in subdirs if p.name.isdigit()]
    if numeric:
        names = {int(p.name) for p in numeric}
        missing = [str(folder / str(c)) for c in range(num_classes) if c not in names]
        if missing:
            raise CorruptDataError(
                f"{what}: class folder(s) missing: {', '.join(missing)}",
                hint="the download is incomplete; unpack the release again",
            )
    elif len(subdirs) != num_classes:
        raise CorruptDataError(
            f"{what}: expected {num_classes} class folders in {folder}, found "
            f"{len(subdirs)} ({', '.join(p.name for p in subdirs) or 'none'})"
        )
    found = []
    for sub in subdirs:
        recs = records(image_files(sub), num_classes)
        if sub.name.isdigit():
            wrong = [r.path for r in recs if r.label != int(sub.name)]
            if wrong:
                raise CorruptDataError(f"{wrong[0]}: label in the name differs from its folder")
        found += recs
    return found


def scan_flat_or_nested(folder: Path, num_classes: int, what: str) -> list[Record]:
    """``folder/*`` (flat) or ``folder/<label>/*``: the releases use both for valid/test."""
    require_dir(folder, what)
    if any(p.is_dir() for p in folder.iterdir()):
        return scan_class_folders(folder, num_classes, what)
    return records(image_files(folder), num_classes)


def find_ratio_dir(root: Path, ratio: float, what: str) -> Path:
    """``root/<ratio>pct``, or a clear error listing the ratios that do exist."""

    folder = root / ratio_dirname(ratio)
    if not folder.is_dir():
        present = sorted(p.name for p in root.glob("*pct") if p.is_dir()) if root.is_dir() else []
        raise DataNotFoundError(
            f"{what}: no folder for ratio {ratio:g}% ({folder} does not exist); "
            f"ratios present: {', '.join(present) or 'none'}"
        )
    return folder


def read_records(recs: list[Record], size: tuple[int, int], name: str, out_dir: Path) -> None:
    """Decode records into a prepared split in ``out_dir``: ``images.npy`` (uint8, written
    as it is decoded, never whole in memory) and ``attrs.npy`` (int64 ``[label, bias]``)."""
    if not recs:
        raise CorruptDataError(f"split {name!r} has no images")
    labels = np.array([r.label for r in recs], dtype=np.int64)
    biases = np.array([r.bias for r in recs], dtype=np.int64)
    decode_files([r.path for r in recs], size, out=out_dir / "images.npy", desc=f"decoding {name}")
    np.save(out_dir / "attrs.npy", np.stack([labels, biases], axis=1))
